"""n-step double-Q Bellman targets (R2D2).

Kapturowski, Ostrovski, Quan, Munos and Dabney, "Recurrent Experience Replay in Distributed Reinforcement
Learning" (R2D2), ICLR 2019, section 2.3 (n-step double Q-learning targets with value rescaling); van Hasselt,
Guez and Silver, "Deep Reinforcement Learning with Double Q-learning", AAAI 2016 (the double-Q bootstrap).
The original SEED RL implementation is ``n_step_bellman_target`` in ``agents/r2d2/learner.py``; the paper does
not say what happens at episode and sequence ends, this module does (and matches the original).

Shapes: T = unroll length (time-major), B = batch, A = number of actions.

Alignment. Index ``t`` of every ``[T, B]`` input describes the transition ``s_t -> s_{t+1}``::

    state          s_0          s_1          s_2      ...     s_{T-1}          s_T
    transition t       \\___ 0 ___/ \\___ 1 ___/       ...           \\__ T-1 __/
    r_t            reward received after acting (a_t) in s_t
    discount_t     gamma * (1 - done_{t+1}): 0 when the episode ends on arriving in s_{t+1}
    bootstrap_t    Q'(s_{t+1}) = Q_target(s_{t+1}, argmax_a Q_online(s_{t+1}, a)), NOT rescaled (h^-1 applied)

This is also the original's alignment: its ``rewards[t]``, ``done[t]`` ("the episode is done just after
experiencing reward r_t") and ``q_target[t]`` (``Q_target(s_{t+1}, a*)``) are our ``r_t``,
``discount_t = gamma * (1 - done[t])`` and ``bootstrap_t``.

The R2D2 learner composes the pieces as::

    target = stop_gradient(h(n_step_bellman_target(r, discount, h^-1(double_q_bootstrap(q_online, q_target)), n)))

(``h`` from :mod:`seed_rl.ops.value_rescaling`; it then regresses ``Q(s_t, a_t)`` on ``target[t]``).
"""

from __future__ import annotations

import numbers
from typing import Any

import tensorflow as tf

__all__ = ["double_q_bootstrap", "n_step_bellman_target"]


def _as_float32(fn_name: str, name: str, x: Any) -> tf.Tensor:
    """Tensors must already be float32; Python numbers and numpy arrays are converted to float32."""
    if tf.is_tensor(x) or isinstance(x, tf.Variable):
        if x.dtype != tf.float32:
            raise TypeError(f"{fn_name}: `{name}` must be float32, got a {x.dtype.name} tensor.")
        return tf.convert_to_tensor(x)
    return tf.convert_to_tensor(x, dtype=tf.float32)


def n_step_bellman_target(rewards: Any, discounts: Any, bootstrap_values: Any, n_steps: int) -> tf.Tensor:
    r"""n-step Bellman targets with per-step discounts, truncated at the end of the sequence (R2D2 sec. 2.3).

    For each ``t`` with ``k = min(n_steps, T - t)`` steps available::

        target_t = sum_{i=0}^{k-1} (prod_{j=0}^{i-1} discount_{t+j}) r_{t+i}
                   + (prod_{j=0}^{k-1} discount_{t+j}) bootstrap_{t+k-1}

    so with a constant ``gamma`` and no episode end it is ``sum_i gamma^i r_{t+i} + gamma^n Q'(s_{t+n})``. A zero
    discount inside the window (an episode end) cuts the sum: later rewards and the bootstrap value are multiplied
    by 0. Near the end of the sequence (``T - t < n_steps``) the return is truncated to the ``T - t`` steps that
    exist and bootstraps from the last value ``Q'(s_T)`` (the original reaches the same numbers by padding the
    values with ``Q'(s_T) / gamma^k``). For example with ``T = 4`` and ``n_steps = 3``::

        target_0 = r_0 + d_0 r_1 + d_0 d_1 r_2 + d_0 d_1 d_2 Q'(s_3)      (3 steps)
        target_1 = r_1 + d_1 r_2 + d_1 d_2 r_3 + d_1 d_2 d_3 Q'(s_4)      (3 steps)
        target_2 = r_2 + d_2 r_3 + d_2 d_3 Q'(s_4)                        (2 steps, truncated)
        target_3 = r_3 + d_3 Q'(s_4)                                      (1 step, truncated)

    Computed by the backward recursion ``G^(1)_t = r_t + d_t bootstrap_t``,
    ``G^(m)_t = r_t + d_t G^(m-1)_{t+1}`` with ``G^(m)_T = bootstrap_{T-1}`` (past the end, the return is the
    last value): ``n_steps - 1`` whole-tensor shifts, so the graph grows with ``n_steps`` (a small static int) but
    not with T, and T may be unknown at trace time.

    Args:
      rewards: ``[T, B]`` float32, ``r_t``.
      discounts: ``[T, B]`` float32, ``discount_t = gamma * (1 - done_{t+1})``.
      bootstrap_values: ``[T, B]`` float32, ``Q'(s_{t+1})`` in the *unrescaled* value space.
      n_steps: Python int ``>= 1``; 1 is one-step TD.

    Any extra trailing dimensions, identical across the three tensors, are treated element-wise. Tensors must be
    float32 (another dtype raises ``TypeError``); Python numbers and numpy arrays are converted. Ranks and known
    static shapes are checked here, so a misaligned input fails when the function is traced.

    Returns:
      ``[T, B]`` float32 targets, under ``tf.stop_gradient``.
    """
    fn_name = "n_step_bellman_target"
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral) or n_steps < 1:
        raise ValueError(f"{fn_name}: `n_steps` must be a Python int >= 1, got {n_steps!r}.")
    n_steps = int(n_steps)
    r_t = _as_float32(fn_name, "rewards", rewards)
    discount_t = _as_float32(fn_name, "discounts", discounts)
    bootstrap_t = _as_float32(fn_name, "bootstrap_values", bootstrap_values)
    if r_t.shape.rank is None or r_t.shape.rank < 2:
        raise ValueError(f"{fn_name}: `rewards` must have a known rank >= 2 ([T, B]), got shape {r_t.shape}.")
    for name, x in (("discounts", discount_t), ("bootstrap_values", bootstrap_t)):
        if x.shape.rank != r_t.shape.rank or not x.shape.is_compatible_with(r_t.shape):
            raise ValueError(
                f"{fn_name}: `{name}` must have the shape of `rewards` ({r_t.shape}, [T, B]), got {x.shape}."
            )

    with tf.name_scope(fn_name):
        # Past the end of the sequence every m-step return equals the last bootstrap value Q'(s_T).
        last_value = bootstrap_t[-1:]
        target = r_t + discount_t * bootstrap_t  # G^(1).
        for _ in range(n_steps - 1):
            target_tp1 = tf.concat([target[1:], last_value], axis=0)
            target = r_t + discount_t * target_tp1  # G^(m) from G^(m-1).
        return tf.stop_gradient(target, name="n_step_target")


def double_q_bootstrap(q_online: Any, q_target: Any) -> tf.Tensor:
    """Double Q-learning bootstrap ``Q_target(s, argmax_a Q_online(s, a))`` (van Hasselt et al. 2016, eq. 4).

    The online network picks the action and the target network evaluates it, which removes the overestimation of
    ``max_a Q_target(s, a)``. Ties in ``q_online`` go to the lowest action index (``tf.argmax``).

    Args:
      q_online: ``[T, B, A]`` float, the online network's Q-values of ``s_{t+1}`` (only its argmax is used).
      q_target: ``[T, B, A]`` float of the same dtype, the target network's Q-values of ``s_{t+1}``.

    The values are returned as they come (in R2D2 they are in the rescaled space; the caller applies
    ``inverse_value_rescaling`` before :func:`n_step_bellman_target`). Non-floating tensors raise ``TypeError``.

    Returns:
      ``[T, B]``, ``q_target[t, b, argmax_a q_online[t, b, a]]``, under ``tf.stop_gradient``.
    """
    fn_name = "double_q_bootstrap"
    q_online = tf.convert_to_tensor(q_online, dtype=None if tf.is_tensor(q_online) else tf.float32)
    q_target = tf.convert_to_tensor(q_target, dtype=None if tf.is_tensor(q_target) else tf.float32)
    for name, q in (("q_online", q_online), ("q_target", q_target)):
        if not q.dtype.is_floating:
            raise TypeError(f"{fn_name}: `{name}` must be a floating-point tensor, got {q.dtype.name}.")
        if q.shape.rank != 3:
            raise ValueError(f"{fn_name}: `{name}` must be [T, B, A], got shape {q.shape}.")
    if q_online.dtype != q_target.dtype:
        raise TypeError(
            f"{fn_name}: `q_online` ({q_online.dtype.name}) and `q_target` ({q_target.dtype.name}) must have "
            "the same dtype."
        )
    if not q_online.shape.is_compatible_with(q_target.shape):
        raise ValueError(
            f"{fn_name}: `q_online` {q_online.shape} and `q_target` {q_target.shape} must have the same shape."
        )

    with tf.name_scope(fn_name):
        best_action = tf.argmax(q_online, axis=-1, output_type=tf.int32)
        value = tf.gather(q_target, best_action, axis=-1, batch_dims=2)
        return tf.stop_gradient(value, name="double_q_bootstrap")
