"""The V-trace actor-critic loss (IMPALA, Espeholt et al. 2018, section 4), as the original's compute_loss.

Shapes: T = unroll length, B = batch. The unroll is time-major with T + 1 steps: step t holds
``(a_{t-1}, (r_t, d_t, o_t, ...), mu-output at o_t)``. The learner re-runs the network over all T + 1 steps from the
stored first state; the value of the last step is the bootstrap value, the loss uses steps 0..T-1 with rewards and
dones of steps 1..T.

Truncation: an actor reports a truncated episode (``abandoned``) with the original's two-message protocol: first
the terminal observation with ``done = False``, then the reset observation with ``done = abandoned = True`` and
reward 0. The step holding the terminal observation is therefore followed by a fake transition; we give that
step a zero TD error (its target is its own value) and mask it out of the policy and entropy terms, so the step
before it bootstraps from V(terminal observation) instead of treating the episode as terminated.
"""

from __future__ import annotations

import tensorflow as tf

from seed_rl.agents.vtrace.config import VTraceConfig
from seed_rl.ops import vtrace
from seed_rl.types import LossResult


def compute_loss(config: VTraceConfig, network, distribution, entropy_cost, unroll) -> LossResult:
    """The loss of a time-major unroll batch.

    ``network(prev_actions, env_outputs, state, unroll=True) -> (outputs with .policy_logits and .baseline, state)``
    is re-run over the unroll; ``distribution`` gives log-probs and entropies of its logits; ``entropy_cost()`` is
    the (possibly adapted) entropy coefficient.
    """
    c = config
    dist = distribution
    learner_outputs, _ = network(unroll.prev_actions, unroll.env_outputs, unroll.agent_state, unroll=True)

    bootstrap_value = learner_outputs.baseline[-1]
    behaviour = tf.nest.map_structure(lambda t: t[:-1], unroll.agent_outputs)
    learner_outputs = tf.nest.map_structure(lambda t: t[:-1], learner_outputs)
    env_next = tf.nest.map_structure(lambda t: t[1:], unroll.env_outputs)

    values = learner_outputs.baseline
    rewards = tf.cast(env_next.reward, tf.float32)
    if c.max_abs_reward:
        rewards = tf.clip_by_value(rewards, -c.max_abs_reward, c.max_abs_reward)
    done = tf.cast(env_next.done, tf.bool)
    fake = tf.cast(env_next.abandoned, tf.bool) & done  # step t is the terminal obs of a truncated episode
    valid = 1.0 - tf.cast(fake, tf.float32)
    discounts = tf.cast(~done, tf.float32) * c.discounting
    rewards = tf.where(fake, tf.stop_gradient(values), rewards)

    target_log_probs = dist.log_prob(learner_outputs.policy_logits, behaviour.action)
    behaviour_log_probs = dist.log_prob(behaviour.policy_logits, behaviour.action)
    log_rhos = target_log_probs - behaviour_log_probs
    returns = vtrace.from_importance_weights(
        log_rhos=log_rhos, discounts=discounts, rewards=rewards, values=values,
        bootstrap_value=bootstrap_value, clip_rho_threshold=c.clip_rho_threshold,
        clip_pg_rho_threshold=c.clip_pg_rho_threshold, lambda_=c.lambda_)

    num_steps = tf.cast(tf.size(values), tf.float32)
    pg_sign = -1.0 if c.flip_policy_gradient else 1.0
    policy_loss = -pg_sign * tf.reduce_sum(target_log_probs * returns.pg_advantages * valid) / num_steps
    v_error = returns.vs - values
    baseline_loss = c.baseline_cost * 0.5 * tf.reduce_mean(tf.square(v_error))
    entropy = dist.entropy(learner_outputs.policy_logits)
    mean_entropy = tf.reduce_sum(entropy * valid) / tf.maximum(tf.reduce_sum(valid), 1.0)
    entropy_cost = entropy_cost()
    entropy_loss = -tf.stop_gradient(entropy_cost) * mean_entropy
    kl = tf.reduce_mean(behaviour_log_probs - target_log_probs)
    kl_loss = c.kl_cost * kl
    if c.target_entropy is not None:
        adjustment_loss = entropy_cost * tf.stop_gradient(mean_entropy - c.target_entropy)
    else:
        adjustment_loss = 0.0 * entropy_cost
    total = policy_loss + baseline_loss + entropy_loss + kl_loss + adjustment_loss
    metrics = {
        "losses/policy": policy_loss,
        "losses/baseline": baseline_loss,
        "losses/entropy": entropy_loss,
        "losses/kl": kl_loss,
        "losses/total": total,
        "policy/entropy": mean_entropy,
        "policy/entropy_cost": entropy_cost,
        "policy/kl_behaviour_target": kl,
        "policy/mean_rho": tf.reduce_mean(tf.exp(log_rhos)),
        "value/mean": tf.reduce_mean(values),
        "value/l2_error": tf.reduce_mean(tf.square(v_error)),
        "value/mean_target": tf.reduce_mean(returns.vs),
    }
    return LossResult(total, metrics)
