"""An LSTM core that resets its state to zero at episode boundaries, unrolled over time with ``tf.scan``.

Shapes: T = unroll length, B = batch. Inputs are time-major ``[T, B, F]``; ``done`` is ``[T, B]`` bool and marks
steps whose observation is the first of a new episode (the original's EnvOutput convention), so the state is
zeroed *before* processing such a step.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class ResettingLSTM(keras.layers.Layer):
    """``keras.layers.LSTMCell`` applied over time with a reset to the zero state where ``done`` is true."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.cell = keras.layers.LSTMCell(units, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.cell.build((None, input_shape[-1]))
        super().build(input_shape)

    def initial_state(self, batch_size: int) -> tuple[tf.Tensor, tf.Tensor]:
        return (tf.zeros([batch_size, self.units]), tf.zeros([batch_size, self.units]))

    def call(self, inputs, done, state):
        """inputs [T, B, F] float32, done [T, B] bool, state (h, c) each [B, units] -> (outputs [T, B, units], state)."""
        if not self.built:
            self.build(inputs.shape)

        def step(carry, xs):
            _, (h, c) = carry
            x_t, done_t = xs
            keep = tf.cast(~done_t, h.dtype)[:, None]
            out, (h, c) = self.cell(x_t, [h * keep, c * keep])
            return out, (h, c)

        init = (tf.zeros_like(state[0]), tuple(state))
        outputs, final_state = tf.scan(step, (inputs, done), initializer=init)
        return outputs, (final_state[0][-1], final_state[1][-1])
