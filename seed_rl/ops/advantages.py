"""Advantage estimators of the on-policy family (the original's ``agents/policy_gradient/modules/advantages.py``):
V-trace advantages, generalized advantage estimation (GAE, arXiv 1506.02438) and n-step returns.

Each takes time-major tensors and returns ``(value targets [T, B], advantages [T, B])``, both with stopped
gradients:

* ``values`` ``[T + 1, B]``: the value estimates of steps ``0 .. T`` (the last one bootstraps);
* ``rewards`` ``[T, B]``: the reward after the action of each of steps ``0 .. T - 1``;
* ``done_terminated`` ``[T, B]``: the episode terminated after that action (the future is worth 0);
* ``done_abandoned`` ``[T, B]``: the episode was cut there (a time limit): the step's advantage is 0, its target
  its own value, and nothing propagates across it.

Episodes never leak into each other: a termination or an abandonment stops the backward accumulation.
"""

from __future__ import annotations

from typing import Any, Tuple

import tensorflow as tf

__all__ = ["gae", "nstep", "vtrace_advantages"]


def vtrace_advantages(values: Any, rewards: Any, done_terminated: Any, done_abandoned: Any, discount: float,
                      target_log_probs: Any, behaviour_log_probs: Any, lambda_: float = 1.0,
                      max_importance_weight: float = 1.0) -> Tuple[tf.Tensor, tf.Tensor]:
    """V-trace targets and advantages with truncated importance weights ``rho_t = min(pi/mu, max_w)``.

    With ``delta_t = r_t + gamma (1 - term_t) V_{t+1} - V_t`` (0 where abandoned) and the accumulator
    ``acc_t = rho_t (delta_t + gamma lambda m_t acc_{t+1})`` (``m_t`` 0 after a termination or an abandonment):
    target ``V_t + acc_t``; advantage ``delta_t + gamma lambda m_t acc_{t+1}`` (no ``rho_t``: the advantage of the
    action actually taken). With ``max_w = 1`` the targets are IMPALA's v-trace targets with ``rho-bar = c-bar = 1``.
    """
    values = tf.convert_to_tensor(values, tf.float32)
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    log_rhos = tf.convert_to_tensor(target_log_probs, tf.float32) - tf.convert_to_tensor(behaviour_log_probs,
                                                                                          tf.float32)
    rhos = tf.exp(tf.minimum(log_rhos, tf.math.log(float(max_importance_weight))))
    not_terminated = 1.0 - tf.cast(done_terminated, tf.float32)
    not_abandoned = 1.0 - tf.cast(done_abandoned, tf.float32)
    deltas = (rewards + discount * not_terminated * values[1:] - values[:-1]) * not_abandoned
    propagate = not_terminated * not_abandoned * discount * lambda_

    def step(carry, xs):
        _, next_acc = carry
        delta, prop, rho = xs
        advantage = delta + prop * next_acc
        return advantage, rho * advantage

    initial = (tf.zeros_like(values[0]), tf.zeros_like(values[0]))
    advantages, accumulators = tf.scan(step, (deltas, propagate, rhos), initializer=initial, reverse=True)
    targets = values[:-1] + accumulators
    return tf.stop_gradient(targets), tf.stop_gradient(advantages)


def gae(values: Any, rewards: Any, done_terminated: Any, done_abandoned: Any, discount: float,
        lambda_: float = 1.0) -> Tuple[tf.Tensor, tf.Tensor]:
    """GAE: ``A_t = sum_l (gamma lambda)^l delta_{t+l}`` within the episode; targets ``V_t + A_t``. V-trace
    advantages on on-policy data (all importance weights 1)."""
    zeros = tf.zeros_like(tf.convert_to_tensor(rewards, tf.float32))
    return vtrace_advantages(values, rewards, done_terminated, done_abandoned, discount, zeros, zeros, lambda_)


def nstep(values: Any, rewards: Any, done_terminated: Any, done_abandoned: Any, discount: float,
          n: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """n-step returns ``G_t = r_t + gamma r_{t+1} + ... + gamma^{k-1} r_{t+k-1} + gamma^k V_{t+k}``, ``k = n`` or
    fewer where the unroll ends (it then bootstraps from ``V_T``); a termination ends the sum with no bootstrap;
    an abandoned step stands for its own value (the return stops there with ``V`` of that step). Advantages
    ``G_t - V_t``. ``T`` must be static."""
    values = tf.convert_to_tensor(values, tf.float32)
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    length = rewards.shape[0]
    if length is None:
        raise ValueError("nstep needs a static unroll length (rewards.shape[0])")
    if n < 1:
        raise ValueError(f"nstep: n must be >= 1, got {n}")
    terminated = tf.cast(done_terminated, tf.bool)
    abandoned = tf.cast(done_abandoned, tf.bool)
    steps = min(n, length)
    batch = tf.shape(values)[1:]
    pad = steps - 1
    # The last pad steps are padded as abandoned, so that every window of `steps` steps has the same form.
    pad_values = tf.zeros(tf.concat([[pad], batch], 0))
    all_values = tf.concat([values, pad_values], 0)
    all_rewards = tf.concat([rewards, pad_values], 0)
    all_terminated = tf.concat([terminated, tf.zeros(tf.concat([[pad], batch], 0), tf.bool)], 0)
    all_abandoned = tf.concat([abandoned, tf.ones(tf.concat([[pad], batch], 0), tf.bool)], 0)
    future = all_values[steps:]  # [T, B]: V_{t + steps}, or padding (replaced below)
    for i in range(steps):  # innermost (farthest) step first
        start = steps - 1 - i
        window = slice(start, start + length)
        bootstrap = all_rewards[window] + discount * tf.where(all_terminated[window], 0.0, future)
        future = tf.where(all_abandoned[window], all_values[window], bootstrap)
    return tf.stop_gradient(future), tf.stop_gradient(future - values[:-1])
