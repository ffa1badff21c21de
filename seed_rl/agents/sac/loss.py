"""The SAC loss (Haarnoja et al. 2018) as the original's ``agents/sac/learner.py`` ``compute_loss``.

Shapes: T = unroll length (1 in the MLP presets), B = batch. The unroll is time-major with T + 1 steps: step t
holds ``(a_{t-1}, (r_t, d_t, o_t, ...), the behaviour output at o_t)``; the losses use steps 0..T-1, with rewards
and dones of steps 1..T and the bootstrap from the observations of steps 1..T. ``o`` below stands for the
network's features of a step: the observation (MLP), or the observation with the LSTMs' outputs after running
from the unroll's stored first state (``network=lstm``; the original's ``ActorCriticLSTM``, no burn-in).

* Actor: ``a ~ pi(.|o)`` reparametrised; the loss is ``-sum_i sg(d minQ(o, a) / d a_i) a_i - sg(alpha) H(pi(.|o))``
  averaged over the steps, so that its gradient reaches the policy through the action only (never the critics).
  The original averages over the action dimensions too, which divides the Q term by their number (deviation 33).
* V: ``(V(o) - sg(minQ(o, a) - alpha log pi(a|o)))^2``.
* Q: ``(Q_i(o, a_behaviour) - sg(r + gamma (1 - d) v'))^2`` for every critic, where ``v'`` is the target network's
  ``V(o')`` (``bootstrap_net=v``) or ``min_i Q'_i(o', a') + alpha H(pi(.|o'))`` at a fresh ``a' ~ pi(.|o')`` (``q``).
* alpha: ``alpha sg(mean H - target_entropy)`` when a target entropy is set (Lagrange style, as V-trace's).

Truncation: an actor reports a truncated episode with two messages (the terminal observation with ``done = False``,
then the reset observation with ``done = abandoned = True``): the fake transition between them gets no Q loss, and
the transition into the terminal observation bootstraps from it (agents/vtrace/loss.py).
"""

from __future__ import annotations

import tensorflow as tf

from seed_rl.agents.sac.config import SACConfig
from seed_rl.types import LossResult


def compute_loss(config: SACConfig, network, target_network, distribution, entropy_cost, unroll) -> LossResult:
    c = config
    env = unroll.env_outputs
    # The networks' inputs over all T + 1 steps from the unroll's first state (the LSTM network's cores run once;
    # for the MLP network these are the observations): steps 0..T-1 for the losses, 1..T for the bootstrap.
    features, _ = network.features(unroll.prev_actions, env, unroll.agent_state)
    target_features, _ = target_network.features(unroll.prev_actions, env, unroll.agent_state)
    obs = tf.nest.map_structure(lambda t: t[:-1], features)
    next_obs = tf.nest.map_structure(lambda t: t[1:], features)
    target_next_obs = tf.nest.map_structure(lambda t: t[1:], target_features)
    env_next = tf.nest.map_structure(lambda t: t[1:], env)
    rewards = tf.cast(env_next.reward, tf.float32)
    if c.flip_reward_sign:
        rewards = -rewards
    if c.max_abs_reward:
        rewards = tf.clip_by_value(rewards, -c.max_abs_reward, c.max_abs_reward)
    done = tf.cast(env_next.done, tf.bool)
    fake = done & tf.cast(env_next.abandoned, tf.bool)  # step t is the terminal obs of a truncated episode
    valid = 1.0 - tf.cast(fake, tf.float32)
    discounts = tf.cast(~done, tf.float32) * c.discounting
    num_steps = tf.cast(tf.size(rewards), tf.float32)
    alpha = entropy_cost()
    sg_alpha = tf.stop_gradient(alpha)

    params = network.action_params(obs)
    action = distribution.sample(params)
    entropy = distribution.entropy(params)
    value = network.value(obs)

    # Actor: the critics' gradient with respect to the action, applied to the action (DDPG style).
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(action)
        q_action = network.q_values(obs, action)
        min_q = tf.reduce_min(q_action, axis=-1)
    grad_action = tf.stop_gradient(tape.gradient(min_q, action))
    actor_loss = -tf.reduce_mean(tf.reduce_sum(grad_action * action, axis=-1))
    actor_loss -= sg_alpha * tf.reduce_mean(entropy)
    log_pi = distribution.log_prob(params, tf.stop_gradient(action))
    actor_objective = tf.stop_gradient(min_q - sg_alpha * log_pi)

    v_error = value - actor_objective
    v_loss = tf.reduce_mean(tf.square(v_error))

    behaviour_action = unroll.agent_outputs.action[:-1]
    q_old = network.q_values(obs, behaviour_action)
    if c.bootstrap_net == "q":
        next_params = network.action_params(next_obs)
        next_action = distribution.sample(next_params)
        next_q = tf.reduce_min(target_network.q_values(target_next_obs, next_action), axis=-1)
        next_v = next_q + sg_alpha * distribution.entropy(next_params)
    else:
        next_v = target_network.value(target_next_obs)
    target_q = tf.stop_gradient(rewards + discounts * next_v)
    q_error = q_old - target_q[..., None]
    q_loss = tf.reduce_sum(tf.reduce_mean(tf.square(q_error), axis=-1) * valid) / num_steps

    mean_entropy = tf.reduce_mean(entropy)
    if c.target_entropy is not None:
        adjustment_loss = alpha * tf.stop_gradient(mean_entropy - c.target_entropy)
    else:
        adjustment_loss = 0.0 * alpha
    total = actor_loss + q_loss + v_loss + adjustment_loss
    loc, std = distribution.loc_and_std(params)
    metrics = {
        "Q/value": tf.reduce_mean(q_action),
        "Q/l2_error": tf.sqrt(tf.reduce_sum(tf.reduce_mean(tf.square(q_error), -1) * valid)
                              / tf.maximum(tf.reduce_sum(valid), 1.0)),
        "V/value": tf.reduce_mean(value),
        "V/l2_error": tf.sqrt(tf.reduce_mean(tf.square(v_error))),
        "losses/actor": actor_loss,
        "losses/Q": q_loss,
        "losses/V": v_loss,
        "losses/total": total,
        "policy/std": tf.reduce_mean(std),
        "policy/max_abs_mean(before_squashing)": tf.reduce_max(tf.abs(loc)),
        "policy/entropy": mean_entropy,
        "policy/entropy_cost": alpha,
    }
    batch = tf.shape(rewards)[1]
    return LossResult(total, metrics, priorities=tf.ones([batch], tf.float32))
