"""Running mean and standard deviation trackers (the original's ``agents/policy_gradient/modules/
running_statistics.py``), for observation and reward normalisation of the on-policy family.

* :class:`FixedMeanStd`: constants;
* :class:`EMAMeanStd`: exponential moving averages of the first and second moments (mean 0, std 1 at the start);
* :class:`AverageMeanStd`: the mean and variance of every sample seen so far (Chan et al.'s batch update of
  Welford's algorithm), in float64: the original needed a two-level float32 tracker to stay accurate after
  millions of updates (its ``TwoLevelAverageMeanStd``); float64 has the mantissa without the second level.

Each tracks ``size`` features (the last axis); ``update(data)`` takes ``[..., size]``. An update whose new
statistics would not be finite (a batch holding a NaN, or values so extreme that their squares overflow) leaves
the statistics as they were: they live outside the optimizer, so the learner's guard on non-finite updates
(``Trainer``) could not undo them, and one bad batch would poison every later normalisation. Under a multi-replica
strategy each replica sees its slice of the batch: the batch's sums are all-reduced first, so every replica applies
the same update to its copy (``ONLY_FIRST_REPLICA`` aggregation), and the statistics are those of the whole batch.
"""

from __future__ import annotations

import abc
from typing import Any, Tuple

import tensorflow as tf

__all__ = ["AverageMeanStd", "EMAMeanStd", "FixedMeanStd"]

_FIRST = tf.VariableAggregation.ONLY_FIRST_REPLICA


def _batch_sums(data: Any, dtype) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(count, sum, sum of squares) over every axis but the last, summed across replicas in replica context."""
    data = tf.cast(tf.convert_to_tensor(data), dtype)
    axes = list(range(data.shape.rank - 1))
    count = tf.cast(tf.reduce_prod(tf.shape(data)[:-1]), dtype) * tf.ones([data.shape[-1]], dtype)
    sums = [count, tf.reduce_sum(data, axes), tf.reduce_sum(tf.square(data), axes)]
    context = tf.distribute.get_replica_context()
    if context is not None and context.num_replicas_in_sync > 1:
        sums = context.all_reduce(tf.distribute.ReduceOp.SUM, sums)
    return sums[0], sums[1], sums[2]


def _assign_if_finite(*pairs: Tuple[tf.Variable, tf.Tensor]) -> None:
    """Assigns each ``(variable, value)`` only when every value is finite (else every variable keeps its own):
    the same decision on every replica, whose values come from all-reduced sums."""
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(value)) for _, value in pairs])
    for variable, value in pairs:
        variable.assign(tf.where(finite, value, variable))


class _MeanStd(tf.Module, metaclass=abc.ABCMeta):
    def normalize(self, x: Any) -> tf.Tensor:
        mean, std = self.mean_std()
        return (tf.cast(x, tf.float32) - mean) / std

    def unnormalize(self, x: Any) -> tf.Tensor:
        mean, std = self.mean_std()
        return std * tf.cast(x, tf.float32) + mean

    @abc.abstractmethod
    def mean_std(self) -> Tuple[tf.Tensor, tf.Tensor]:
        """The current mean and std, each ``[size]`` float32."""


class FixedMeanStd(_MeanStd):
    """A fixed mean and std (no normalisation with the defaults); ``update`` does nothing."""

    def __init__(self, size: int, mean: float = 0.0, std: float = 1.0):
        super().__init__()
        self.size, self._mean, self._std = int(size), float(mean), float(std)

    def update(self, data: Any) -> None:
        del data

    def mean_std(self) -> Tuple[tf.Tensor, tf.Tensor]:
        ones = tf.ones([self.size])
        return self._mean * ones, self._std * ones


class EMAMeanStd(_MeanStd):
    """``m1 <- m1 + beta (mean(x) - m1)``, ``m2 <- m2 + beta (mean(x^2) - m2)``; std ``sqrt(m2 - m1^2)`` clipped to
    ``[std_min, std_max]``. Starts at mean 0, std 1."""

    def __init__(self, size: int, beta: float = 1e-2, std_min: float = 1e-6, std_max: float = 1e6):
        super().__init__()
        self.beta, self.std_min, self.std_max = float(beta), float(std_min), float(std_max)
        self.first_moment = tf.Variable(tf.zeros([size]), trainable=False, aggregation=_FIRST, name="first_moment")
        self.second_moment = tf.Variable(tf.ones([size]), trainable=False, aggregation=_FIRST, name="second_moment")

    def update(self, data: Any) -> None:
        count, total, squares = _batch_sums(data, tf.float32)
        _assign_if_finite(
            (self.first_moment, self.first_moment + self.beta * (total / count - self.first_moment)),
            (self.second_moment, self.second_moment + self.beta * (squares / count - self.second_moment)))

    def mean_std(self) -> Tuple[tf.Tensor, tf.Tensor]:
        mean = tf.identity(self.first_moment)
        variance = tf.maximum(self.second_moment - tf.square(mean), 0.0)
        return mean, tf.clip_by_value(tf.sqrt(variance), self.std_min, self.std_max)


class AverageMeanStd(_MeanStd):
    """The mean and std of every sample so far (float64 statistics). Before any sample: mean 0, std 1 (the
    original's trick: the variance and the count both start at ``std_min ** 2``)."""

    def __init__(self, size: int, std_min: float = 1e-6, std_max: float = 1e6):
        super().__init__()
        self.std_min, self.std_max = float(std_min), float(std_max)
        zeros = tf.zeros([size], tf.float64)
        self.count = tf.Variable(zeros, trainable=False, aggregation=_FIRST, name="count")
        self.mean = tf.Variable(zeros, trainable=False, aggregation=_FIRST, name="mean")
        self.summed_variance = tf.Variable(zeros, trainable=False, aggregation=_FIRST, name="summed_variance")

    def update(self, data: Any) -> None:
        m, total, squares = _batch_sums(data, tf.float64)
        batch_mean = total / m
        batch_m2 = squares - m * tf.square(batch_mean)  # the batch's summed squared deviations
        n = tf.identity(self.count)
        new_count = n + m
        delta = batch_mean - self.mean
        _assign_if_finite(
            (self.summed_variance,
             self.summed_variance + tf.maximum(batch_m2, 0.0) + tf.square(delta) * n * m / new_count),
            (self.mean, self.mean + delta * m / new_count),
            (self.count, new_count))

    def mean_std(self) -> Tuple[tf.Tensor, tf.Tensor]:
        floor = self.std_min * self.std_min
        variance = tf.maximum(self.summed_variance, floor) / tf.maximum(self.count, floor)
        std = tf.clip_by_value(tf.sqrt(variance), self.std_min, self.std_max)
        return tf.cast(self.mean, tf.float32), tf.cast(std, tf.float32)
