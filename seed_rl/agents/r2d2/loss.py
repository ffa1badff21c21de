"""The R2D2 loss: burn-in, n-step double-Q targets with value rescaling, importance-weighted squared TD errors.

Shapes: L = burn_in + T + 1 stored steps, B = batch, A = actions. The unroll is time-major; step t holds
``(a_{t-1}, (r_t, d_t, o_t), (a_t, Q_acting(o_t)))``. Both networks are first run over the ``burn_in`` prefix from
the stored recurrent state (the exact state at the sequence's first step; the original's was ``burn_in`` steps
late), the online state under ``stop_gradient``; the loss uses the remaining T + 1 steps:

    delta_t = h(G_t) - Q(o_t, a_t),   G_t = n-step return of r_{t+1..} bootstrapped with
              h^-1(Q_target(o_{t+k}, argmax_a Q_online(o_{t+k}, a)))          (double Q, stop_gradient)
    loss    = mean_b( w_b * 0.5 * sum_t delta_t^2 ),   priority_b = eta max_t |delta_t| + (1 - eta) mean_t |delta_t|

Truncation (``abandoned``) uses the actors' two-message protocol (see agents/vtrace/loss.py): the step holding the
terminal observation is followed by a fake transition, which gets reward h^-1(value of the terminal observation)
and discount 0 — the steps before bootstrap from that value — and is itself masked out of the loss.
"""

from __future__ import annotations

import tensorflow as tf

from seed_rl.agents.r2d2.config import R2D2Config
from seed_rl.ops.nstep import double_q_bootstrap, n_step_bellman_target
from seed_rl.ops.priorities import sequence_priorities
from seed_rl.ops.value_rescaling import inverse_value_rescaling, value_rescaling
from seed_rl.types import LossResult


def sequence_td_errors(config: R2D2Config, q_online, q_target, suffix):
    """|delta_t| [T, B] and the valid-step mask [T, B] for Q-values ``[T + 1, B, A]`` over the loss window."""
    eps = config.value_function_rescaling_epsilon
    actions = suffix.agent_outputs.action[:-1]
    q_taken = tf.gather(q_online[:-1], actions, batch_dims=2)
    env_next = tf.nest.map_structure(lambda t: t[1:], suffix.env_outputs)
    rewards = tf.cast(env_next.reward, tf.float32)
    if config.flip_reward_sign:
        rewards = -rewards
    done = tf.cast(env_next.done, tf.bool)
    fake = done & tf.cast(env_next.abandoned, tf.bool)
    discounts = tf.cast(~done, tf.float32) * config.discounting
    values = inverse_value_rescaling(double_q_bootstrap(q_online, q_target), eps)  # value of o_t, [T + 1, B]
    rewards = tf.where(fake, values[:-1], rewards)
    targets = value_rescaling(n_step_bellman_target(rewards, discounts, values[1:], config.n_steps), eps)
    valid = 1.0 - tf.cast(fake, tf.float32)
    delta = tf.stop_gradient(targets) - q_taken
    return delta, valid


def compute_loss(config: R2D2Config, network, target_network, unroll, weights=None) -> LossResult:
    """The loss of a time-major sequence batch. ``network`` and ``target_network`` are called as
    ``net(prev_actions, env_outputs, state, unroll=True) -> (outputs with .q_values, state)``; ``weights`` [B] are
    the importance-sampling weights (None: all 1). Returns the loss, scalar metrics and the new priorities [B]."""
    c = config
    burn_in = c.burn_in
    prefix = tf.nest.map_structure(lambda t: t[:burn_in], unroll)
    suffix = tf.nest.map_structure(lambda t: t[burn_in:], unroll)
    online_state = target_state = unroll.agent_state
    if burn_in:
        _, online_state = network(prefix.prev_actions, prefix.env_outputs, online_state, unroll=True)
        online_state = tf.nest.map_structure(tf.stop_gradient, online_state)
        _, target_state = target_network(prefix.prev_actions, prefix.env_outputs, target_state, unroll=True)
    q_online = network(suffix.prev_actions, suffix.env_outputs, online_state, unroll=True)[0].q_values
    q_target = target_network(suffix.prev_actions, suffix.env_outputs, target_state, unroll=True)[0].q_values
    q_target = tf.stop_gradient(q_target)

    delta, valid = sequence_td_errors(c, q_online, q_target, suffix)
    per_sequence = 0.5 * tf.reduce_sum(tf.square(delta) * valid, axis=0)
    if weights is None:
        weights = tf.ones_like(per_sequence)
    loss = tf.reduce_mean(tf.cast(weights, tf.float32) * per_sequence)
    priorities = sequence_priorities(tf.abs(delta), valid, c.priority_mix)
    metrics = {
        "losses/total": loss,
        "losses/td_squared": tf.reduce_sum(tf.square(delta) * valid) / tf.maximum(tf.reduce_sum(valid), 1.0),
        "q/mean": tf.reduce_mean(q_online),
        "q/max": tf.reduce_max(q_online),
        "replay/mean_importance_weight": tf.reduce_mean(tf.cast(weights, tf.float32)),
    }
    return LossResult(loss, metrics, tf.stop_gradient(priorities))
