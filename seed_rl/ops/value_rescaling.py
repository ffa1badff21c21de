"""Invertible value-function rescaling for Q-learning targets (R2D2).

Pohlen, Piot, Hester et al., "Observe and Look Further: Achieving Consistent Performance on Atari", 2018
(arXiv 1805.11593), section 3.2 (the transformed Bellman operator), Proposition A.2 (the inverse);
Kapturowski, Ostrovski, Quan, Munos and Dabney, "Recurrent Experience Replay in Distributed Reinforcement
Learning" (R2D2), ICLR 2019, section 2 and table 2 (``epsilon = 1e-3``). The original SEED RL learner
(``agents/r2d2/learner.py``) applies them with the ``value_function_rescaling_epsilon`` flag (default 1e-3)::

    h(x)      = sign(x) (sqrt(|x| + 1) - 1) + epsilon x
    h^-1(x)   = sign(x) (((sqrt(1 + 4 epsilon (|x| + 1 + epsilon)) - 1) / (2 epsilon))^2 - 1)

``h`` squashes large returns roughly to their square root while staying strictly increasing and odd; the
``epsilon x`` term keeps it Lipschitz-invertible. R2D2 regresses ``Q`` on ``h(n-step target)``, where the target
bootstraps from ``h^-1(Q_target)``.

Both functions are element-wise, so any shape works (the learner uses ``[T, B]`` and ``[T, B, A]``, T = unroll
length, B = batch, A = number of actions). They are differentiable; the caller decides what goes under
``tf.stop_gradient``.

Numerics: the code evaluates algebraically identical forms without the catastrophic cancellation of the formulas
above near zero (``sqrt(|x| + 1) - 1`` and ``z^2 - 1`` with ``z ~ 1``), so float32 round trips are accurate to a
few ulps everywhere instead of the ~2e-4 absolute error the literal formula has near 0::

    h(x)    = x (1 / (sqrt(|x| + 1) + 1) + epsilon)
    h^-1(x) = x * 2 / (s + 1 + 2 epsilon) * (1 + 2 (|x| + 1 + epsilon) / (s + 1)),
              s = sqrt(1 + 4 epsilon (|x| + 1 + epsilon))

(from ``sqrt(a) - b = (a - b^2) / (sqrt(a) + b)``: ``z - 1 = 2 |x| / (s + 1 + 2 epsilon)`` and
``z = 2 (|x| + 1 + epsilon) / (s + 1)``, so ``z^2 - 1 = (z - 1)(z + 1)``).
"""

from __future__ import annotations

import numbers
from typing import Any

import tensorflow as tf

__all__ = ["inverse_value_rescaling", "value_rescaling"]


def _as_float(fn_name: str, x: Any) -> tf.Tensor:
    """Floating tensors keep their dtype; Python numbers and numpy arrays become float32; anything else raises."""
    if tf.is_tensor(x) or isinstance(x, tf.Variable):
        if not x.dtype.is_floating:
            raise TypeError(f"{fn_name}: `x` must be a floating-point tensor, got a {x.dtype.name} tensor.")
        return tf.convert_to_tensor(x)
    return tf.convert_to_tensor(x, dtype=tf.float32)


def _epsilon(fn_name: str, epsilon: Any, dtype: tf.DType, allow_zero: bool) -> tf.Tensor:
    """A Python number is range-checked here; a tensor must be a scalar and is cast to ``dtype``."""
    if isinstance(epsilon, bool) or epsilon is None:
        raise TypeError(f"{fn_name}: `epsilon` must be a number or a scalar tensor, got {epsilon!r}.")
    if isinstance(epsilon, numbers.Real):
        if epsilon < 0 or (epsilon == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise ValueError(f"{fn_name}: `epsilon` must be {bound}, got {epsilon}.")
        return tf.constant(epsilon, dtype=dtype)
    epsilon = tf.convert_to_tensor(epsilon)
    if epsilon.shape.rank != 0:
        raise ValueError(f"{fn_name}: `epsilon` must be a scalar, got shape {epsilon.shape}.")
    return tf.cast(epsilon, dtype)


def value_rescaling(x: Any, epsilon: Any = 1e-3) -> tf.Tensor:
    """``h(x) = sign(x) (sqrt(|x| + 1) - 1) + epsilon x`` (Pohlen et al. 2018; R2D2 table 2), element-wise.

    Args:
      x: a floating-point tensor of any shape (typically ``[T, B]`` targets); Python numbers and numpy arrays
        are converted to float32. Integer tensors raise ``TypeError``.
      epsilon: the Lipschitz term, a Python number ``>= 0`` or a scalar tensor (cast to ``x``'s dtype).

    Returns:
      ``h(x)``, same shape and dtype as ``x``; differentiable (no ``stop_gradient``). ``h(0) = 0`` exactly.
    """
    x = _as_float("value_rescaling", x)
    epsilon = _epsilon("value_rescaling", epsilon, x.dtype, allow_zero=True)
    with tf.name_scope("value_rescaling"):
        # sign(x) (sqrt(|x| + 1) - 1) = x / (sqrt(|x| + 1) + 1): same value, no cancellation near 0.
        return x * (1.0 / (tf.sqrt(tf.abs(x) + 1.0) + 1.0) + epsilon)


def inverse_value_rescaling(x: Any, epsilon: Any = 1e-3) -> tf.Tensor:
    """``h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)``, element-wise.

    Pohlen et al. 2018, Proposition A.2: the exact inverse of :func:`value_rescaling` for the same ``epsilon``.

    Args:
      x: a floating-point tensor of any shape (typically ``[T, B]`` rescaled Q-values); Python numbers and numpy
        arrays are converted to float32. Integer tensors raise ``TypeError``.
      epsilon: a Python number ``> 0`` or a scalar tensor (cast to ``x``'s dtype); must match the one of ``h``.

    Returns:
      ``h^-1(x)``, same shape and dtype as ``x``; differentiable (no ``stop_gradient``). ``h^-1(0) = 0`` exactly.
    """
    x = _as_float("inverse_value_rescaling", x)
    epsilon = _epsilon("inverse_value_rescaling", epsilon, x.dtype, allow_zero=False)
    with tf.name_scope("inverse_value_rescaling"):
        abs_x_plus_1_plus_eps = tf.abs(x) + 1.0 + epsilon
        s = tf.sqrt(1.0 + 4.0 * epsilon * abs_x_plus_1_plus_eps)
        # z = (s - 1) / (2 eps) and h^-1(x) = sign(x) (z - 1)(z + 1), with both factors in cancellation-free form:
        # (z - 1) = 2 |x| / (s + 1 + 2 eps), z = 2 (|x| + 1 + eps) / (s + 1).
        z_minus_1_over_abs_x = 2.0 / (s + 1.0 + 2.0 * epsilon)
        z_plus_1 = 2.0 * abs_x_plus_1_plus_eps / (s + 1.0) + 1.0
        return x * z_minus_1_over_abs_x * z_plus_1
