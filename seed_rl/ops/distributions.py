"""Parametric action distributions: what a policy head outputs and how actions are drawn and scored.

A distribution object holds no parameters of its own; the network's policy head outputs ``param_size`` numbers
per step and every method takes them as its first argument (the same split as the original SEED RL
``common/parametric_distribution.py``):

* :class:`Categorical` over A actions (``[..., A]`` logits, int32 actions ``[...]``);
* :class:`MultiCategorical` over D independent dimensions of K values each (``[..., D * K]`` logits, int32
  actions ``[..., D]``);
* :class:`Normal` over D dimensions (``[..., 2 D]``: means, then the raw std parameters that a std function maps
  to standard deviations), float32 actions ``[..., D]``;
* :class:`TanhNormal`: a normal squashed by tanh into (-1, 1), with the change-of-variables log-det in its log-prob
  and a one-sample estimate of it in its entropy, as the original;
* :class:`ClippedNormal`: a normal clipped to [-1, 1], scored as the unclipped normal (the original's
  ``ClippedIdentity``, whose log-det is 0).

The std functions are the original's: :func:`softplus_default_std` (``softplus(x) + 1e-3``), and
:func:`softplus_std` / :func:`safe_exp_std`, shifted so that a raw parameter of 0 gives ``std_for_zero_param``.
Written without TensorFlow Probability (not a dependency); every formula is checked against numpy or closed forms
in ``tests/ops/test_distributions.py``.

Shapes: parameters ``[..., P]`` over any leading batch dimensions (``[T, B, P]`` in a loss, ``[B, P]`` at
inference); log-probs, entropies and KLs are ``[...]`` (summed over an action's dimensions).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np
import tensorflow as tf

from seed_rl.types import ArraySpec

__all__ = ["Categorical", "ClippedNormal", "MultiCategorical", "Normal", "TanhNormal", "get_distribution",
           "safe_exp_std", "softplus_default_std", "softplus_std"]

_LOG_2PI = math.log(2.0 * math.pi)


class Categorical:
    """Categorical distribution over ``num_actions`` actions, parametrised by unnormalised logits ``[..., A]``.

    Probabilities are ``softmax(logits)``; every computation goes through ``tf.nn.log_softmax`` so that large
    logits do not overflow, and a logit of ``-inf`` (a masked action) has probability 0 without producing NaNs.
    Actions are int32.
    """

    action_dtype = tf.int32

    def __init__(self, num_actions: int | None = None):
        """``num_actions`` is optional: the methods read A from the logits; it only feeds :meth:`param_size`."""
        if num_actions is not None and num_actions <= 0:
            raise ValueError(f"Categorical: num_actions must be positive, got {num_actions}.")
        self.num_actions = num_actions

    def __repr__(self) -> str:
        return f"Categorical(num_actions={self.num_actions})"

    def param_size(self, num_actions: int | None = None) -> int:
        """The number of logits the policy head must output: one per action.

        ``num_actions`` defaults to the one given to the constructor.
        """
        n = self.num_actions if num_actions is None else num_actions
        if n is None or n <= 0:
            raise ValueError(f"Categorical.param_size: need a positive number of actions, got {n}.")
        return int(n)

    def sample(self, logits: Any, seed: int | None = None) -> tf.Tensor:
        """Draws one action per row: ``[..., A]`` logits -> ``[...]`` int32 actions (``tf.random.categorical``)."""
        logits = tf.convert_to_tensor(logits)
        num_actions = tf.shape(logits)[-1]
        # tf.random.categorical wants [batch, A].
        flat_logits = tf.reshape(logits, [-1, num_actions])
        flat_actions = tf.random.categorical(flat_logits, 1, dtype=self.action_dtype, seed=seed)
        return tf.reshape(flat_actions, tf.shape(logits)[:-1])

    def log_prob(self, logits: Any, actions: Any) -> tf.Tensor:
        """``log softmax(logits)[a]``: ``[..., A]`` logits and ``[...]`` integer actions -> ``[...]``."""
        logits = tf.convert_to_tensor(logits)
        actions = tf.convert_to_tensor(actions)
        if not actions.dtype.is_integer:
            raise TypeError(
                f"Categorical.log_prob: actions must be integers, got {actions.dtype.name}."
            )
        if actions.shape.rank is None or (
            logits.shape.rank is not None and actions.shape.rank != logits.shape.rank - 1
        ):
            raise ValueError(
                f"Categorical.log_prob: actions {actions.shape} must have the shape of logits {logits.shape} "
                "without its last (action) dimension."
            )
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        return tf.gather(
            log_probs, tf.cast(actions, tf.int32), axis=-1, batch_dims=actions.shape.rank
        )

    def entropy(self, logits: Any) -> tf.Tensor:
        """``H = -sum_a p(a) log p(a)``: ``[..., A]`` -> ``[...]``."""
        log_p = tf.nn.log_softmax(logits, axis=-1)
        # multiply_no_nan: a masked action (p = 0, log p = -inf) contributes 0, not NaN.
        return -tf.reduce_sum(tf.math.multiply_no_nan(log_p, tf.exp(log_p)), axis=-1)

    def kl_divergence(self, p_logits: Any, q_logits: Any) -> tf.Tensor:
        """``KL(p || q) = sum_a p(a) (log p(a) - log q(a))``: two ``[..., A]`` -> ``[...]``."""
        log_p = tf.nn.log_softmax(p_logits, axis=-1)
        log_q = tf.nn.log_softmax(q_logits, axis=-1)
        return tf.reduce_sum(tf.math.multiply_no_nan(log_p - log_q, tf.exp(log_p)), axis=-1)

    def mode(self, logits: Any) -> tf.Tensor:
        """The most likely action: ``[..., A]`` -> ``[...]`` int32."""
        return tf.argmax(logits, axis=-1, output_type=self.action_dtype)


class MultiCategorical:
    """``num_dims`` independent categoricals of ``num_values`` values each (the original's multi-categorical):
    ``[..., D * K]`` logits, read as ``[..., D, K]``; int32 actions ``[..., D]``; log-probs, entropies and KLs
    summed over the D dimensions."""

    action_dtype = tf.int32

    def __init__(self, num_dims: int, num_values: int):
        if num_dims <= 0 or num_values <= 0:
            raise ValueError(f"MultiCategorical: num_dims and num_values must be positive, got {num_dims} and "
                             f"{num_values}.")
        self.num_dims, self.num_values = int(num_dims), int(num_values)
        self._categorical = Categorical(num_values)

    def __repr__(self) -> str:
        return f"MultiCategorical(num_dims={self.num_dims}, num_values={self.num_values})"

    def param_size(self, num_values: Optional[int] = None) -> int:
        del num_values  # the constructor's
        return self.num_dims * self.num_values

    def _logits(self, params: Any) -> tf.Tensor:
        params = tf.convert_to_tensor(params)
        return tf.reshape(params, tf.concat([tf.shape(params)[:-1], [self.num_dims, self.num_values]], 0))

    def sample(self, params: Any, seed: int | None = None) -> tf.Tensor:
        return self._categorical.sample(self._logits(params), seed=seed)

    def log_prob(self, params: Any, actions: Any) -> tf.Tensor:
        return tf.reduce_sum(self._categorical.log_prob(self._logits(params), actions), axis=-1)

    def entropy(self, params: Any, seed: int | None = None) -> tf.Tensor:
        del seed
        return tf.reduce_sum(self._categorical.entropy(self._logits(params)), axis=-1)

    def kl_divergence(self, p_params: Any, q_params: Any) -> tf.Tensor:
        return tf.reduce_sum(self._categorical.kl_divergence(self._logits(p_params), self._logits(q_params)), axis=-1)

    def mode(self, params: Any) -> tf.Tensor:
        return self._categorical.mode(self._logits(params))


StdFn = Callable[[Any], Any]
"""Raw std parameters -> standard deviations (> 0), elementwise."""


def softplus_default_std(x: Any) -> tf.Tensor:
    """The original's default: ``softplus(x) + 1e-3`` (std 0.694 for a raw parameter of 0)."""
    return tf.nn.softplus(x) + 1e-3


def softplus_std(std_for_zero_param: float = 1.0, min_std: float = 1e-3) -> StdFn:
    """``softplus(x + shift) + min_std`` with the shift that maps x = 0 to ``std_for_zero_param``."""
    if not std_for_zero_param > min_std >= 0:
        raise ValueError(f"softplus_std: need std_for_zero_param > min_std >= 0, got {std_for_zero_param} and "
                         f"{min_std}")
    target = std_for_zero_param - min_std
    shift = float(target + np.log(-np.expm1(-target)))  # softplus^-1(target), stable

    def fn(x: Any) -> tf.Tensor:
        return tf.nn.softplus(tf.convert_to_tensor(x) + shift) + min_std

    return fn


@tf.custom_gradient
def _safe_exp(x):
    """``exp`` of x clipped to [-15, 15], with the gradient of the unclipped exp at the clipped point (the
    original's ``safe_exp``: the gradient does not vanish where the value is clipped)."""
    e = tf.exp(tf.clip_by_value(x, -15.0, 15.0))

    def grad(dy):
        return dy * e

    return e, grad


def safe_exp_std(std_for_zero_param: float = 1.0, min_std: float = 1e-3) -> StdFn:
    """``safe_exp(x + shift) + min_std`` with the shift that maps x = 0 to ``std_for_zero_param``."""
    if not std_for_zero_param > min_std >= 0:
        raise ValueError(f"safe_exp_std: need std_for_zero_param > min_std >= 0, got {std_for_zero_param} and "
                         f"{min_std}")
    shift = math.log(std_for_zero_param - min_std)

    def fn(x: Any) -> tf.Tensor:
        return _safe_exp(tf.convert_to_tensor(x, tf.float32) + shift) + min_std

    return fn


def _log_ndtr(z: tf.Tensor) -> tf.Tensor:
    """``log Phi(z)`` of the standard normal CDF, stable in the far left tail (an asymptotic series below -5)."""
    safe_mid = tf.maximum(z, -5.0)
    mid = tf.math.log(0.5 * tf.math.erfc(-safe_mid / math.sqrt(2.0)))
    safe_tail = tf.minimum(z, -5.0)
    z2 = tf.square(safe_tail)
    tail = (-0.5 * z2 - tf.math.log(-safe_tail) - 0.5 * _LOG_2PI
            + tf.math.log1p(-1.0 / z2 + 3.0 / tf.square(z2) - 15.0 / (z2 * tf.square(z2))))
    return tf.where(z > -5.0, mid, tail)


class Normal:
    """A diagonal normal over ``num_dims`` dimensions: parameters ``[..., 2 D]`` = means then raw std parameters
    (``std_fn`` maps them to standard deviations); float32 actions ``[..., D]``. Reparametrised sampling
    (``loc + std * eps``); log-prob, entropy and KL in closed form, summed over the dimensions."""

    action_dtype = tf.float32

    def __init__(self, num_dims: int, std_fn: StdFn = softplus_default_std):
        if num_dims <= 0:
            raise ValueError(f"{type(self).__name__}: num_dims must be positive, got {num_dims}.")
        self.num_dims = int(num_dims)
        self.std_fn = std_fn

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_dims={self.num_dims})"

    def param_size(self, num_values: Optional[int] = None) -> int:
        del num_values  # the constructor's
        return 2 * self.num_dims

    def loc_and_std(self, params: Any) -> tuple[tf.Tensor, tf.Tensor]:
        loc, raw = tf.split(tf.convert_to_tensor(params, tf.float32), 2, axis=-1)
        return loc, self.std_fn(raw)

    def sample_base(self, params: Any, seed: int | None = None) -> tf.Tensor:
        """A draw of the normal itself (before any squashing)."""
        loc, std = self.loc_and_std(params)
        return loc + std * tf.random.normal(tf.shape(loc), seed=seed)

    def sample(self, params: Any, seed: int | None = None) -> tf.Tensor:
        return self.sample_base(params, seed)

    def base_log_prob(self, params: Any, values: Any) -> tf.Tensor:
        """``log N(values; loc, std)`` per dimension ``[..., D]``."""
        loc, std = self.loc_and_std(params)
        z = (tf.convert_to_tensor(values, tf.float32) - loc) / std
        return -0.5 * tf.square(z) - tf.math.log(std) - 0.5 * _LOG_2PI

    def log_prob(self, params: Any, actions: Any) -> tf.Tensor:
        return tf.reduce_sum(self.base_log_prob(params, actions), axis=-1)

    def base_entropy(self, params: Any) -> tf.Tensor:
        _, std = self.loc_and_std(params)
        return 0.5 + 0.5 * _LOG_2PI + tf.math.log(std)

    def entropy(self, params: Any, seed: int | None = None) -> tf.Tensor:
        del seed
        return tf.reduce_sum(self.base_entropy(params), axis=-1)

    def kl_divergence(self, p_params: Any, q_params: Any) -> tf.Tensor:
        """``KL(p || q)`` of the normals, summed over the dimensions (squashing does not change a KL)."""
        p_loc, p_std = self.loc_and_std(p_params)
        q_loc, q_std = self.loc_and_std(q_params)
        kl = (tf.math.log(q_std / p_std) + (tf.square(p_std) + tf.square(p_loc - q_loc)) / (2.0 * tf.square(q_std))
              - 0.5)
        return tf.reduce_sum(kl, axis=-1)

    def mode(self, params: Any) -> tf.Tensor:
        return self.loc_and_std(params)[0]


class TanhNormal(Normal):
    """A normal squashed by tanh into (-1, 1) (the original's ``normal_tanh_distribution``).

    Actions are the squashed values. ``log_prob(a) = log N(atanh a) - log(1 - a^2)`` (change of variables), with
    ``a`` clipped to ``[-threshold, threshold]`` and, at or beyond the threshold, the log of the average density
    of the tail that tanh maps there (``log P(u >= atanh threshold) - log(1 - threshold)``, and its mirror), so that
    an action on the bound has a finite log-prob with a gradient for the parameters. ``entropy`` is the normal's
    plus the log-det at one sample of the normal (an unbiased, differentiable estimate, as the original);
    ``kl_divergence`` is the normals' (tanh is a bijection). ``mode`` is ``tanh(loc)``.
    """

    def __init__(self, num_dims: int, std_fn: StdFn = softplus_default_std, threshold: float = 0.999):
        super().__init__(num_dims, std_fn)
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"TanhNormal: threshold must be in (0, 1), got {threshold}")
        self.threshold = float(threshold)

    def sample(self, params: Any, seed: int | None = None) -> tf.Tensor:
        return tf.tanh(self.sample_base(params, seed))

    @staticmethod
    def log_det_jacobian(pre_tanh: Any) -> tf.Tensor:
        """``log |d tanh(u) / du| = log(1 - tanh(u)^2)``, computed stably as ``2 (log 2 - u - softplus(-2 u))``."""
        u = tf.convert_to_tensor(pre_tanh, tf.float32)
        return 2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u))

    def log_prob(self, params: Any, actions: Any) -> tf.Tensor:
        loc, std = self.loc_and_std(params)
        th = self.threshold
        a = tf.clip_by_value(tf.convert_to_tensor(actions, tf.float32), -th, th)
        u = tf.atanh(a)
        inside = (-0.5 * tf.square((u - loc) / std) - tf.math.log(std) - 0.5 * _LOG_2PI
                  - tf.math.log1p(-tf.square(a)))
        edge = math.atanh(th)
        log_epsilon = math.log(1.0 - th)
        left = _log_ndtr((-edge - loc) / std) - log_epsilon
        right = _log_ndtr((loc - edge) / std) - log_epsilon
        per_dim = tf.where(a <= -th, left, tf.where(a >= th, right, inside))
        return tf.reduce_sum(per_dim, axis=-1)

    def entropy(self, params: Any, seed: int | None = None) -> tf.Tensor:
        return tf.reduce_sum(self.base_entropy(params) + self.log_det_jacobian(self.sample_base(params, seed)),
                             axis=-1)

    def mode(self, params: Any) -> tf.Tensor:
        return tf.tanh(self.loc_and_std(params)[0])


class ClippedNormal(Normal):
    """A normal whose samples are clipped to [-1, 1] (the original's ``normal_clipped_distribution``). Scored as
    the unclipped normal: the original's clipping bijector has a log-det of 0, so an action on a bound gets the
    normal's density there, not the mass beyond it."""

    def sample(self, params: Any, seed: int | None = None) -> tf.Tensor:
        return tf.clip_by_value(self.sample_base(params, seed), -1.0, 1.0)

    def mode(self, params: Any) -> tf.Tensor:
        return tf.clip_by_value(self.loc_and_std(params)[0], -1.0, 1.0)


def get_distribution(action_spec: ArraySpec, continuous: str = "tanh",
                     std_fn: StdFn = softplus_default_std) -> Any:
    """The action distribution for an action spec (the original's ``get_parametric_distribution_for_action_space``):

    * a discrete scalar (``num_values > 0``, shape ``()``): :class:`Categorical`;
    * discrete of shape ``(D,)``: :class:`MultiCategorical` over D dimensions of ``num_values`` each;
    * continuous of shape ``(D,)`` bounded to [-1, 1] in every dimension: :class:`TanhNormal`
      (``continuous="tanh"``) or :class:`ClippedNormal` (``"clipped"``), with ``std_fn``.

    Raises:
      TypeError: when ``action_spec`` is not an ``ArraySpec`` (for example a nest of specs).
      ValueError: any other spec, with the reason; continuous bounds other than [-1, 1] are refused, as the
        original did (rescale the env's actions to [-1, 1]).
    """
    if not isinstance(action_spec, ArraySpec):
        raise TypeError(
            f"get_distribution: expected a seed_rl.types.ArraySpec for the action, got {type(action_spec).__name__}."
        )
    shape = tuple(action_spec.shape)
    if action_spec.num_values > 0:
        if shape == ():
            return Categorical(action_spec.num_values)
        if len(shape) == 1:
            return MultiCategorical(shape[0], action_spec.num_values)
        raise ValueError(f"get_distribution: a discrete action must have shape () or (D,), got {shape}.")
    if len(shape) != 1 or not np.issubdtype(np.dtype(action_spec.dtype), np.floating):
        raise ValueError(f"get_distribution: a continuous action must be a float vector of shape (D,), got "
                         f"{action_spec.dtype} of shape {shape}.")
    low = np.broadcast_to(np.asarray(-np.inf if action_spec.minimum is None else action_spec.minimum, np.float64),
                          shape)
    high = np.broadcast_to(np.asarray(np.inf if action_spec.maximum is None else action_spec.maximum, np.float64),
                           shape)
    if not (np.all(low == -1.0) and np.all(high == 1.0)):
        raise ValueError(f"get_distribution: continuous actions must be bounded to [-1, 1] in every dimension (the "
                         f"original's rule; rescale the env's actions), got minimum {low.tolist()} and maximum "
                         f"{high.tolist()}.")
    if continuous == "tanh":
        return TanhNormal(shape[0], std_fn)
    if continuous == "clipped":
        return ClippedNormal(shape[0], std_fn)
    raise ValueError(f"get_distribution: continuous must be 'tanh' or 'clipped', got {continuous!r}.")
