"""Dynamic loss scaling for float16 training (``--precision=float16``).

float16 has 5 exponent bits: gradients below ~6e-8 flush to zero and values above 65,504 overflow. Scaling the
loss by S before the backward pass moves the small gradients into float16's range; the gradients are divided by S
again (in float32) before the optimizer sees them. The scale adapts, as in Keras's ``LossScaleOptimizer`` and
Micikevicius et al., "Mixed Precision Training" (arXiv 1710.03740), section 3.2:

* a step whose unscaled gradients hold a NaN or an infinity (or whose loss is not finite) is skipped by the
  trainer's guard, which every precision shares (the optimizer's weights, moments and iteration count are left
  as they were), and the scale is halved;
* after ``growth_interval`` finite steps in a row the scale is doubled, up to ``MAX_SCALE``.

bfloat16 has float32's exponent and needs none of this. The scale and its counter are not in checkpoints: a
resumed run starts again at ``initial_scale`` and finds its level within a few (skipped) updates, and a checkpoint
restores under any precision.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import tensorflow as tf

__all__ = ["MAX_SCALE", "DynamicLossScale"]

MAX_SCALE = 2.0**24
"""The scale never grows beyond this: float16's largest value is ~2**16, so a loss scaled further only overflows."""


class DynamicLossScale:
    """The scale and its counter as variables of the compiled update (create it in the strategy's scope).

    Args:
      initial_scale: the first scale (Keras's default, 2**15).
      growth_interval: finite steps in a row before the scale doubles (Keras's default, 2000).
    """

    def __init__(self, initial_scale: float = 2.0**15, growth_interval: int = 2000):
        if initial_scale < 1 or growth_interval < 1:
            raise ValueError(f"initial_scale and growth_interval must be >= 1, got {initial_scale} and "
                             f"{growth_interval}")
        self.initial_scale = float(initial_scale)
        self.growth_interval = int(growth_interval)
        # Replicas compute the same finite flag from all-reduced gradients and write the same values; the first
        # replica's write is kept.
        kwargs = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_WRITE,
                      aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.scale = tf.Variable(self.initial_scale, dtype=tf.float32, name="loss_scale", **kwargs)
        self.good_steps = tf.Variable(0, dtype=tf.int64, name="loss_scale_good_steps", **kwargs)

    def unscale(self, grads: Sequence[Optional[tf.Tensor]]) -> List[Optional[tf.Tensor]]:
        """The gradients divided by the scale, in float32. None stays None. Whether they are finite is the
        trainer's guard's decision (``Trainer``), the same for every precision."""
        scale = tf.convert_to_tensor(self.scale)
        return [None if g is None else tf.cast(g, tf.float32) / scale for g in grads]

    def update(self, finite: tf.Tensor) -> None:
        """After a step: halve the scale (not below 1) and restart the count when it was skipped, else count it
        and double the scale every ``growth_interval`` finite steps."""
        good = tf.where(finite, self.good_steps + 1, tf.zeros_like(self.good_steps))
        grow = good >= self.growth_interval
        grown = tf.where(grow, tf.minimum(self.scale * 2.0, MAX_SCALE), self.scale)
        self.scale.assign(tf.where(finite, grown, tf.maximum(self.scale / 2.0, 1.0)))
        self.good_steps.assign(tf.where(grow, tf.zeros_like(good), good))

    def finish(self, finite: tf.Tensor) -> dict:
        """After a step: its metric (``learner/loss_scale``: the scale it ran with; whether it was skipped is the
        trainer's ``learner/skipped_updates``), then ``update``."""
        metrics = {"learner/loss_scale": tf.convert_to_tensor(self.scale)}
        self.update(finite)
        return metrics
