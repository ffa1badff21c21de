"""The torso of dict observations (``network=multi_input``): each key encoded by the kind of its own spec, the
features concatenated in sorted key order, then one dense ReLU layer over the concatenation.

A key's encoder follows the rule that chooses a whole observation's network (`seed_rl.types.observation_kind`,
the rule of `seed_rl.configs.defaults`), so that a key is encoded as the same array would be on its own:

==========================================  ==============================================================
a key's spec                                its encoder
==========================================  ==============================================================
``[H, W, C]``, ``H * W <= 42 * 42``         `SmallConvTorso` (conv 16 3x3 stride 1, dense 128)
``[H, W, C]``, larger                       `ImpalaShallowTorso` (conv 16 8x8/4, conv 32 4x4/2, dense 256)
anything else                               flattened (a discrete key one-hot encoded, else cast to float),
                                            `MLPTorso` (the agent's ``mlp_sizes``)
==========================================  ==============================================================

Larger images get IMPALA's shallow CNN for every agent (V-trace's own Atari network is the deep ResNet): in a dict
an image is one input among others (a camera beside a robot's joint angles, a map beside an inventory), the
shallow CNN costs about a tenth of the deep ResNet per frame, and one encoder per kind keeps ``multi_input`` one
network whatever the agent. Stable-Baselines3's ``CombinedExtractor`` (the feature extractor of its
``MultiInputPolicy``) makes the same choice of a shallow CNN, the Nature DQN's, for its image keys.

The dense layer after the concatenation (``output_size`` units) mixes the keys: without it, a feed-forward agent's
heads would be linear in each key's features separately (a policy that must compare a ball's column in one key
with a paddle's in another needs them mixed). Stable-Baselines3 likewise puts its policy's MLP (``net_arch``)
after the ``CombinedExtractor``'s concatenation.

Keys are encoded in sorted order, the order of ``tf.nest.flatten`` (the learner's tables, the wire format's
``observation_<key>`` inputs of the SavedModel), whatever the order of the env's dict: the variables are created,
and checkpointed, in that order. uint8 images are scaled to [0, 1] and uint16 packed planes unpacked, as by the
other torsos (`seed_rl.networks.torsos`).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import keras
import tensorflow as tf

from seed_rl.networks.torsos import ImpalaShallowTorso, SmallConvTorso, mlp_torso
from seed_rl.types import IMAGE, SMALL_IMAGE, ArraySpec, observation_kind, one_hot_depth

__all__ = ["MultiInputTorso", "encoder_kinds"]


def encoder_kinds(observation_spec: Mapping[str, ArraySpec]) -> dict:
    """Key -> the kind its encoder is chosen by (``seed_rl.types.VECTOR``, ``SMALL_IMAGE`` or ``IMAGE``), in sorted
    key order. Raises ValueError for an empty dict or a nested one."""
    if not isinstance(observation_spec, Mapping) or not observation_spec:
        raise ValueError(f"the multi_input network takes a non-empty dict of array specs, got {observation_spec!r}")
    kinds = {}
    for key in sorted(observation_spec):
        spec = observation_spec[key]
        if isinstance(spec, Mapping):
            raise ValueError(f"observation[{key!r}] is a nested dict; the multi_input network takes a flat dict")
        kinds[key] = observation_kind(spec)
    return kinds


class MultiInputTorso(keras.layers.Layer):
    """Maps a dict of observations ``{key: [N, ...]}`` to features ``[N, output_size]`` (see the module docstring).

    Args:
      observation_spec: the env's dict of ``ArraySpec`` (one unbatched observation per key).
      mlp_sizes: hidden sizes of the MLP that encodes each key that is not an image.
      output_size: units of the dense ReLU layer over the concatenated features.
    """

    def __init__(self, observation_spec: Mapping[str, ArraySpec], mlp_sizes: Sequence[int] = (64, 64),
                 output_size: int = 256, **kwargs):
        super().__init__(**kwargs)
        self.kinds = encoder_kinds(observation_spec)
        self.keys = tuple(self.kinds)
        self._sizes = {key: max(1, math.prod(int(d) for d in observation_spec[key].shape)) for key in self.keys}
        self.encoders = []
        for i, key in enumerate(self.keys):
            kind = self.kinds[key]
            name = f"encoder_{i}"  # keys may hold characters a layer name may not
            if kind == SMALL_IMAGE:
                self.encoders.append(SmallConvTorso(name=name))
            elif kind == IMAGE:
                self.encoders.append(ImpalaShallowTorso(name=name))
            else:
                self.encoders.append(mlp_torso(mlp_sizes, one_hot_depth=one_hot_depth(observation_spec[key]),
                                              name=name))
        self.fc = keras.layers.Dense(int(output_size), activation="relu", name="mixing")

    def call(self, observation):
        if not isinstance(observation, Mapping) or sorted(observation) != list(self.keys):
            got = sorted(observation) if isinstance(observation, Mapping) else type(observation).__name__
            raise ValueError(f"the multi_input network was built for the keys {list(self.keys)}, got {got}")
        features = []
        for key, encoder in zip(self.keys, self.encoders):
            x = observation[key]
            if self.kinds[key] not in (SMALL_IMAGE, IMAGE):
                # [N, ...] -> [N, size]: a scalar or an [H, W] key becomes a vector (Flatten needs a feature axis).
                x = tf.reshape(x, [-1, self._sizes[key]])
            features.append(encoder(x))
        return self.fc(tf.concat(features, axis=-1))
