"""Parametric action distributions: what a policy head outputs and how actions are drawn and scored.

A distribution object holds no parameters of its own; the network's policy head outputs ``param_size`` numbers
per step and every method takes them as its first argument (the same split as the original SEED RL
``common/parametric_distribution.py``). Only the categorical distribution exists so far; continuous ones
(tanh-normal, clipped-normal) come with the continuous-control agents.

Shapes: ``[..., A]`` logits for A actions, over any leading batch dimensions (``[T, B, A]`` in a loss,
``[B, A]`` at inference).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from seed_rl.types import ArraySpec

__all__ = ["Categorical", "get_distribution"]


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


def get_distribution(action_spec: ArraySpec) -> Categorical:
    """The action distribution for an action spec: :class:`Categorical` for a discrete (scalar) action.

    Raises:
      TypeError: when ``action_spec`` is not an ``ArraySpec`` (for example a nest of specs).
      ValueError: for a continuous or multi-discrete spec; those are not supported yet.
    """
    if not isinstance(action_spec, ArraySpec):
        raise TypeError(
            f"get_distribution: expected a seed_rl.types.ArraySpec for the action, got {type(action_spec).__name__}."
        )
    if action_spec.num_values > 0:
        if tuple(action_spec.shape) != ():
            raise ValueError(
                f"get_distribution: a discrete action must be a scalar (shape ()), got shape {action_spec.shape}; "
                "multi-discrete actions are not supported yet."
            )
        return Categorical(action_spec.num_values)
    raise ValueError(
        f"get_distribution: continuous action spec {action_spec} (num_values == 0) is not supported yet; "
        "continuous distributions (tanh-normal, clipped-normal) come in a later issue."
    )
