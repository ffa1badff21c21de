"""Observation encoders ("torsos"): they map a batch of observations ``[N, ...]`` to features ``[N, F]``.

* ``ImpalaDeepTorso``: the deep residual network of IMPALA (Espeholt et al. 2018, fig. 3), channels 16-32-32,
  as in the original's DMLab/Atari V-trace networks: per section, conv 3x3 -> max-pool 3x3 stride 2 -> two
  residual blocks (relu, conv, relu, conv), then relu, flatten, dense 256 + relu.
* ``NatureTorso``: the DQN Nature CNN used by R2D2 (conv 32 8x8 s4, 64 4x4 s2, 64 3x3 s1, dense 512).
* ``SmallConvTorso``: the MinAtar paper's network for small images (conv 16 3x3 s1, dense 128).
* ``MLPTorso``: dense + relu layers for vector observations; discrete observations (gymnasium's ``Discrete`` and
  ``MultiDiscrete``: int32 with ``num_values`` in their spec) are one-hot encoded first (`one_hot_depth`), as
  Stable-Baselines3 and RLlib encode them: a state index is a label, not a quantity.

uint8 observations are scaled to [0, 1]. uint16 observations are packed boolean planes (16 per channel, the
football family's wire format, `seed_rl.envs.football.pack_bit_planes`): they are unpacked into 0/1 planes
(`unpack_bit_planes`), as the original's Football network did.
"""

from __future__ import annotations

import math
from typing import Sequence

import keras
import tensorflow as tf

# The bit of a uint16 word that holds plane k (k = 0..15): np.packbits' big-endian bytes read as little-endian
# words (seed_rl.envs.football.PLANE_BITS; the original's football/observation.py).
_PLANE_BITS = tuple(7 - k for k in range(8)) + tuple(15 - k for k in range(8))


def unpack_bit_planes(packed: tf.Tensor) -> tf.Tensor:
    """``uint16 [..., W]`` packed planes -> ``float32 [..., 16 * W]`` of 0/1 (plane ``16 * w + k`` from bit
    ``_PLANE_BITS[k]`` of word ``w``)."""
    words = tf.cast(packed, tf.int32)[..., None]
    bits = tf.bitwise.bitwise_and(tf.bitwise.right_shift(words, tf.constant(_PLANE_BITS, tf.int32)), 1)
    shape = tf.concat([tf.shape(packed)[:-1], [tf.shape(packed)[-1] * 16]], 0)
    planes = tf.reshape(tf.cast(bits, tf.float32), shape)
    if packed.shape.rank is not None and packed.shape[-1] is not None:
        planes = tf.ensure_shape(planes, packed.shape[:-1].concatenate([packed.shape[-1] * 16]))
    return planes


def _to_float(observation: tf.Tensor) -> tf.Tensor:
    if observation.dtype == tf.uint8:
        return tf.cast(observation, tf.float32) / 255.0
    if observation.dtype == tf.uint16:
        return unpack_bit_planes(observation)
    return tf.cast(observation, tf.float32)


class _ResidualBlock(keras.layers.Layer):
    def __init__(self, channels: int, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.conv0 = keras.layers.Conv2D(channels, 3, padding="same", kernel_initializer=kernel_initializer)
        self.conv1 = keras.layers.Conv2D(channels, 3, padding="same", kernel_initializer=kernel_initializer)

    def call(self, x):
        y = self.conv0(tf.nn.relu(x))
        y = self.conv1(tf.nn.relu(y))
        return x + y


class ImpalaDeepTorso(keras.layers.Layer):
    """IMPALA's deep ResNet. ``channels`` has one entry per section: (16, 32, 32) for DMLab and Atari, (16, 32, 32,
    32) with ``kernel_initializer='lecun_normal'`` for Football (the original's football/networks.py)."""

    def __init__(self, channels: Sequence[int] = (16, 32, 32), num_blocks: int = 2, output_size: int = 256,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sections = []
        for i, ch in enumerate(channels):
            conv = keras.layers.Conv2D(ch, 3, padding="same", name=f"section{i}_conv",
                                       kernel_initializer=kernel_initializer)
            pool = keras.layers.MaxPooling2D(pool_size=3, strides=2, padding="same")
            blocks = [_ResidualBlock(ch, kernel_initializer, name=f"section{i}_block{j}") for j in range(num_blocks)]
            self.sections.append((conv, pool, blocks))
        self.flatten = keras.layers.Flatten()
        self.fc = keras.layers.Dense(output_size, activation="relu", kernel_initializer=kernel_initializer)

    def call(self, observation):
        x = _to_float(observation)
        for conv, pool, blocks in self.sections:
            x = pool(conv(x))
            for block in blocks:
                x = block(x)
        x = tf.nn.relu(x)
        return self.fc(self.flatten(x))


class ConvTorso(keras.layers.Layer):
    """Convolutions ``(filters, kernel, stride)`` with ReLUs, then a dense ReLU layer: the shape of the Nature DQN
    and IMPALA shallow networks."""

    def __init__(self, convs: Sequence[tuple[int, int, int]], output_size: int, **kwargs):
        super().__init__(**kwargs)
        self.convs = [keras.layers.Conv2D(filters, kernel, strides=stride, activation="relu")
                      for filters, kernel, stride in convs]
        self.flatten = keras.layers.Flatten()
        self.fc = keras.layers.Dense(output_size, activation="relu")

    def call(self, observation):
        x = _to_float(observation)
        for conv in self.convs:
            x = conv(x)
        return self.fc(self.flatten(x))


class ImpalaShallowTorso(ConvTorso):
    """The IMPALA paper's shallow network (Espeholt et al. 2018, figure 3, left): conv 16 8x8 stride 4, conv 32
    4x4 stride 2, a dense layer of 256, ReLUs. About a tenth of the deep ResNet's cost per frame."""

    def __init__(self, output_size: int = 256, **kwargs):
        super().__init__(((16, 8, 4), (32, 4, 2)), output_size, **kwargs)


class NatureTorso(ConvTorso):
    """The Nature DQN network (Mnih et al. 2015): conv 32 8x8/4, conv 64 4x4/2, conv 64 3x3/1, dense 512."""

    def __init__(self, output_size: int = 512, **kwargs):
        super().__init__(((32, 8, 4), (64, 4, 2), (64, 3, 1)), output_size, **kwargs)


class SmallConvTorso(ConvTorso):
    """The MinAtar paper's network for small images (Young & Tian 2019; its examples/dqn.py and AC_lambda.py): one
    convolution of 16 3x3 filters, stride 1, no padding, then a dense layer of 128, ReLUs. The Atari networks'
    strides (8x8 by 4, then 4x4 by 2) leave almost nothing of a 10 x 10 frame; this one keeps every position. It
    needs frames of at least 3 x 3; `seed_rl.configs.defaults` gives it to images of at most 42 x 42 pixels."""

    def __init__(self, output_size: int = 128, **kwargs):
        super().__init__(((16, 3, 1),), output_size, **kwargs)


class MLPTorso(keras.layers.Layer):
    """Flatten (uint8 scaled, uint16 planes unpacked, anything else cast to float), then dense ReLU layers of
    ``sizes``. `mlp_torso` gives `OneHotMLPTorso` for a discrete observation."""

    one_hot_depth = 0

    def __init__(self, sizes: Sequence[int] = (64, 64), **kwargs):
        super().__init__(**kwargs)
        self.sizes = tuple(sizes)
        self.layers_ = [keras.layers.Dense(n, activation="relu") for n in self.sizes]
        self.flatten = keras.layers.Flatten()

    def call(self, observation):
        return self._dense(self.flatten(_to_float(observation)))

    def _dense(self, x):
        for layer in self.layers_:
            x = layer(x)
        return x


class OneHotMLPTorso(MLPTorso):
    """`MLPTorso` on a discrete observation: each element one-hot encoded over ``depth`` values (`one_hot_depth` of
    the observation's spec), then flattened; a value outside ``0..depth - 1``, which its spec does not allow,
    encodes as zeros."""

    def __init__(self, depth: int, sizes: Sequence[int] = (64, 64), **kwargs):
        super().__init__(sizes, **kwargs)
        self.one_hot_depth = int(depth)

    def build(self, input_shape):
        # Built from the shape, not by tracing call() on symbolic inputs (tf.one_hot takes no Keras tensor): the
        # first dense layer sees elements x depth features.
        dims = tuple(input_shape)[1:]
        if all(d is not None for d in dims):
            size = math.prod(int(d) for d in dims) * self.one_hot_depth
            for layer in self.layers_:
                layer.build((None, size))
                size = layer.units
        self.built = True

    def call(self, observation):
        x = tf.one_hot(tf.cast(observation, tf.int32), self.one_hot_depth, dtype=tf.float32)
        return self._dense(tf.reshape(x, [tf.shape(x)[0], -1]))  # [N] or [N, ...] -> [N, elements * depth]


def mlp_torso(sizes: Sequence[int] = (64, 64), one_hot_depth: int = 0, **kwargs) -> MLPTorso:
    """The MLP torso of an observation whose spec gives ``one_hot_depth`` (`seed_rl.types.one_hot_depth`): a
    `OneHotMLPTorso` for a discrete one (depth > 0), else an `MLPTorso`."""
    if one_hot_depth:
        return OneHotMLPTorso(one_hot_depth, sizes, **kwargs)
    return MLPTorso(sizes, **kwargs)
