"""V-trace off-policy actor-critic targets.

Espeholt, Soyer, Munos et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures", ICML 2018 (arXiv 1802.01561), section 4.1, equation (1) and Remark 2 (the lambda variant).

Shapes: T = unroll length, B = batch. Every ``[T, B]`` argument may carry the same extra trailing dimensions
(for example ``[T, B, C]`` for C value heads), in which case ``bootstrap_value`` is ``[B, C]``; the math is
element-wise apart from the backward recursion over T.

Time indexing: step ``t`` of an input holds ``x_t``, ``a_t``, ``r_t = r(x_t, a_t)``, ``discount_t`` (the discount
applied to what follows ``x_{t+1}``, zero when the episode terminates at ``t``) and ``values`` holds
``V(x_t)``; ``bootstrap_value`` is ``V(x_T)``. In the code ``v_t`` is ``V(x_t)`` and ``vs`` holds the paper's
targets ``v_s``.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import tensorflow as tf

from seed_rl.ops.distributions import Categorical

__all__ = [
    "VTraceFromLogitsReturns",
    "VTraceReturns",
    "from_importance_weights",
    "from_logits",
]


class VTraceReturns(NamedTuple):
    """The V-trace targets; both fields are ``[T, B]`` float32 and carry no gradient."""

    vs: tf.Tensor
    """The V-trace value targets ``v_s``, to regress ``V(x_s)`` on."""
    pg_advantages: tf.Tensor
    """The policy-gradient advantages ``min(rho_bar_pg, rho_s) (r_s + discount_s v_{s+1} - V(x_s))``."""


class VTraceFromLogitsReturns(NamedTuple):
    """What :func:`from_logits` returns: the V-trace targets and the log-probabilities they came from."""

    vs: tf.Tensor
    """``[T, B]``: the V-trace value targets (no gradient)."""
    pg_advantages: tf.Tensor
    """``[T, B]``: the policy-gradient advantages (no gradient)."""
    log_rhos: tf.Tensor
    """``[T, B]``: ``log pi(a_t | x_t) - log mu(a_t | x_t)`` (differentiable w.r.t. both logits)."""
    behaviour_action_log_probs: tf.Tensor
    """``[T, B]``: ``log mu(a_t | x_t)`` (differentiable w.r.t. the behaviour logits)."""
    target_action_log_probs: tf.Tensor
    """``[T, B]``: ``log pi(a_t | x_t)`` (differentiable w.r.t. the target logits; the policy loss uses it)."""


def _as_float32(name: str, x: Any) -> tf.Tensor:
    """Tensors must already be float32; Python numbers and numpy arrays are converted to float32."""
    if tf.is_tensor(x) or isinstance(x, tf.Variable):
        if x.dtype != tf.float32:
            raise TypeError(f"V-trace: `{name}` must be float32, got a {x.dtype.name} tensor.")
        return tf.convert_to_tensor(x)
    return tf.convert_to_tensor(x, dtype=tf.float32)


def _scalar_or_none(name: str, x: Any) -> tf.Tensor | None:
    """``None`` stays ``None`` (no clipping); anything else must be a float32 scalar."""
    if x is None:
        return None
    x = _as_float32(name, x)
    if x.shape.rank != 0:
        raise ValueError(f"V-trace: `{name}` must be a scalar, got shape {x.shape}.")
    return x


def from_importance_weights(
    log_rhos: Any,
    discounts: Any,
    rewards: Any,
    values: Any,
    bootstrap_value: Any,
    clip_rho_threshold: Any | None = 1.0,
    clip_pg_rho_threshold: Any | None = 1.0,
    lambda_: Any = 1.0,
) -> VTraceReturns:
    r"""V-trace targets from log importance weights (IMPALA eq. 1, with Remark 2's lambda).

    With ``rho_t = pi(a_t | x_t) / mu(a_t | x_t)`` (target over behaviour policy),
    ``clipped_rho_t = min(rho_bar, rho_t)`` and ``c_t = lambda * min(1, rho_t)``::

        delta_t = clipped_rho_t * (r_t + discount_t * V(x_{t+1}) - V(x_t))
        v_s     = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} discount_i * c_i) * delta_t
        pg_advantage_s = min(rho_bar_pg, rho_s) * (r_s + discount_s * v_{s+1} - V(x_s))

    where ``V(x_T) = v_T = bootstrap_value``. The sum is computed by the backward recursion
    ``v_s - V(x_s) = delta_s + discount_s * c_s * (v_{s+1} - V(x_{s+1}))`` (a ``tf.scan`` over T). With
    ``rho_t = 1`` everywhere (on-policy) ``v_s`` is the lambda-return; with ``lambda_ = 0`` it is the one-step
    TD target ``V(x_s) + delta_s``.

    Args:
      log_rhos: ``[T, B]`` float32, ``log pi(a_t | x_t) - log mu(a_t | x_t)``.
      discounts: ``[T, B]`` float32, ``discount_t`` (``gamma * (1 - done)`` in the learner).
      rewards: ``[T, B]`` float32, ``r_t``.
      values: ``[T, B]`` float32, ``V(x_t)`` under the target policy.
      bootstrap_value: ``[B]`` float32, ``V(x_T)``.
      clip_rho_threshold: scalar ``rho_bar`` clipping the weights of the value targets; ``None`` for no clipping.
      clip_pg_rho_threshold: scalar ``rho_bar_pg`` clipping the weights of the policy-gradient advantages;
        ``None`` for no clipping.
      lambda_: scalar in ``[0, 1]``; mixes one-step (0) and full-trace (1) targets.

    Tensors must be float32 (a float64 or integer tensor raises ``TypeError``); Python numbers and numpy arrays
    are converted to float32. Ranks and known static shapes are checked here, so a misaligned input fails when
    the function is traced.

    Returns:
      ``VTraceReturns(vs, pg_advantages)``, both ``[T, B]`` and both under ``tf.stop_gradient``: gradients never
      flow through the targets into ``values``, ``rewards``, ``log_rhos`` or ``bootstrap_value``.
    """
    log_rhos = _as_float32("log_rhos", log_rhos)
    discounts = _as_float32("discounts", discounts)
    rewards = _as_float32("rewards", rewards)
    values = _as_float32("values", values)
    bootstrap_value = _as_float32("bootstrap_value", bootstrap_value)
    clip_rho_threshold = _scalar_or_none("clip_rho_threshold", clip_rho_threshold)
    clip_pg_rho_threshold = _scalar_or_none("clip_pg_rho_threshold", clip_pg_rho_threshold)
    if lambda_ is None or (isinstance(lambda_, numbers.Real) and not 0.0 <= float(lambda_) <= 1.0):
        raise ValueError(f"V-trace: `lambda_` must be in [0, 1], got {lambda_}.")
    lambda_ = _scalar_or_none("lambda_", lambda_)

    rank = log_rhos.shape.rank
    if rank is None or rank < 2:
        raise ValueError(
            f"V-trace: `log_rhos` must have a known rank >= 2 ([T, B, ...]), got shape {log_rhos.shape}."
        )
    for name, x in (("discounts", discounts), ("rewards", rewards), ("values", values)):
        if x.shape.rank != rank:
            raise ValueError(
                f"V-trace: `{name}` must have the rank of `log_rhos` ({rank}, [T, B, ...]), "
                f"got shape {x.shape} (log_rhos: {log_rhos.shape})."
            )
        if not x.shape.is_compatible_with(log_rhos.shape):
            raise ValueError(
                f"V-trace: `{name}` has shape {x.shape}, incompatible with `log_rhos` {log_rhos.shape}."
            )
    if bootstrap_value.shape.rank != rank - 1 or not bootstrap_value.shape.is_compatible_with(
        log_rhos.shape[1:]
    ):
        raise ValueError(
            f"V-trace: `bootstrap_value` must have shape [B, ...] = {log_rhos.shape[1:]}, "
            f"got {bootstrap_value.shape}."
        )

    with tf.name_scope("vtrace_from_importance_weights"):
        rho_t = tf.exp(log_rhos)
        clipped_rho_t = (
            rho_t if clip_rho_threshold is None else tf.minimum(clip_rho_threshold, rho_t)
        )
        c_t = lambda_ * tf.minimum(1.0, rho_t)
        r_t, discount_t, v_t = rewards, discounts, values

        # V(x_{t+1}) for t = 0..T-1: the next step's value, and the bootstrap value after the last step.
        v_tp1 = tf.concat([v_t[1:], bootstrap_value[tf.newaxis]], axis=0)
        delta_t = clipped_rho_t * (r_t + discount_t * v_tp1 - v_t)

        def backward_step(acc_tp1: tf.Tensor, inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
            delta, discount_times_c = inputs
            return delta + discount_times_c * acc_tp1

        # vs_minus_v[t] = vs_t - V(x_t). `reverse=True` runs t = T-1 .. 0 and keeps outputs in time order.
        vs_minus_v = tf.scan(
            backward_step,
            (delta_t, discount_t * c_t),
            initializer=tf.zeros_like(bootstrap_value),
            reverse=True,
        )
        vs = v_t + vs_minus_v

        vs_tp1 = tf.concat([vs[1:], bootstrap_value[tf.newaxis]], axis=0)
        clipped_pg_rho_t = (
            rho_t if clip_pg_rho_threshold is None else tf.minimum(clip_pg_rho_threshold, rho_t)
        )
        pg_advantages = clipped_pg_rho_t * (r_t + discount_t * vs_tp1 - v_t)

        return VTraceReturns(
            vs=tf.stop_gradient(vs, name="vs"),
            pg_advantages=tf.stop_gradient(pg_advantages, name="pg_advantages"),
        )


def from_logits(
    behaviour_policy_logits: Any,
    target_policy_logits: Any,
    actions: Any,
    discounts: Any,
    rewards: Any,
    values: Any,
    bootstrap_value: Any,
    clip_rho_threshold: Any | None = 1.0,
    clip_pg_rho_threshold: Any | None = 1.0,
    lambda_: Any = 1.0,
) -> VTraceFromLogitsReturns:
    """V-trace targets for a categorical policy, from behaviour (mu) and target (pi) logits.

    Computes ``log_rhos = log pi(a_t | x_t) - log mu(a_t | x_t)`` with a numerically stable log-softmax and
    calls :func:`from_importance_weights`.

    Args:
      behaviour_policy_logits: ``[T, B, A]`` float32, the acting policy's logits (A = number of actions).
      target_policy_logits: ``[T, B, A]`` float32, the learner policy's logits.
      actions: ``[T, B]`` int32 or int64, ``a_t``.
      discounts, rewards, values, bootstrap_value, clip_rho_threshold, clip_pg_rho_threshold, lambda_:
        as in :func:`from_importance_weights`.

    Returns:
      ``VTraceFromLogitsReturns``: ``vs`` and ``pg_advantages`` are under ``tf.stop_gradient``; the
      log-probabilities and ``log_rhos`` are not (the policy-gradient loss differentiates
      ``target_action_log_probs``).
    """
    behaviour_policy_logits = _as_float32("behaviour_policy_logits", behaviour_policy_logits)
    target_policy_logits = _as_float32("target_policy_logits", target_policy_logits)
    actions = tf.convert_to_tensor(actions)
    if not actions.dtype.is_integer:
        raise TypeError(f"V-trace: `actions` must be an integer tensor, got {actions.dtype.name}.")
    for name, logits in (
        ("behaviour_policy_logits", behaviour_policy_logits),
        ("target_policy_logits", target_policy_logits),
    ):
        if logits.shape.rank != 3:
            raise ValueError(f"V-trace: `{name}` must be [T, B, A], got shape {logits.shape}.")
    if actions.shape.rank != 2:
        raise ValueError(f"V-trace: `actions` must be [T, B], got shape {actions.shape}.")

    categorical = Categorical()
    with tf.name_scope("vtrace_from_logits"):
        target_action_log_probs = categorical.log_prob(target_policy_logits, actions)
        behaviour_action_log_probs = categorical.log_prob(behaviour_policy_logits, actions)
        log_rhos = target_action_log_probs - behaviour_action_log_probs
        vtrace_returns = from_importance_weights(
            log_rhos=log_rhos,
            discounts=discounts,
            rewards=rewards,
            values=values,
            bootstrap_value=bootstrap_value,
            clip_rho_threshold=clip_rho_threshold,
            clip_pg_rho_threshold=clip_pg_rho_threshold,
            lambda_=lambda_,
        )
    return VTraceFromLogitsReturns(
        vs=vtrace_returns.vs,
        pg_advantages=vtrace_returns.pg_advantages,
        log_rhos=log_rhos,
        behaviour_action_log_probs=behaviour_action_log_probs,
        target_action_log_probs=target_action_log_probs,
    )
