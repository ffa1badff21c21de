"""Replay priorities of sequences from their TD errors (R2D2, Kapturowski et al. 2019, section 2.3)."""

from __future__ import annotations

import tensorflow as tf


def sequence_priorities(abs_td, valid, eta: float):
    """``eta * max_t |delta| + (1 - eta) * mean_t |delta|`` over the valid steps of each sequence.

    Args:
      abs_td: float32 [T, B] absolute TD errors.
      valid: float32 [T, B], 1 for steps that count and 0 for masked ones (they count in neither term).
      eta: the mix between the max and the mean (0.9 in the R2D2 paper).

    Returns:
      float32 [B]. A sequence without valid steps gets 0.
    """
    masked = abs_td * valid
    count = tf.maximum(tf.reduce_sum(valid, axis=0), 1.0)
    return eta * tf.reduce_max(masked, axis=0) + (1.0 - eta) * tf.reduce_sum(masked, axis=0) / count
