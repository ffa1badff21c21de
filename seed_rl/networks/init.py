"""Re-initialisation of a built actor-critic network with OpenAI baselines' Atari scheme (also CleanRL's).

Kernels of the torso's convolutions and dense layers get an orthogonal matrix with gain ``sqrt(2)`` (the ReLU
gain), the policy head gain 0.01 (an almost uniform first policy), the value head gain 1, every bias zero. The
recurrent core keeps its own initialisation.
"""

from __future__ import annotations

import math

import keras

__all__ = ["orthogonal_init"]


def _reinit(layer, gain: float, seed) -> None:
    kernel = getattr(layer, "kernel", None)
    if kernel is None:
        return
    kernel.assign(keras.initializers.Orthogonal(gain=gain, seed=seed)(kernel.shape, dtype=kernel.dtype))
    bias = getattr(layer, "bias", None)
    if bias is not None:
        bias.assign(keras.ops.zeros(bias.shape, dtype=bias.dtype))


def orthogonal_init(network, seed=None) -> None:
    """Re-initialises ``network`` (an `ActorCriticNetwork` whose variables exist) in place.

    ``seed`` None draws from Keras' global seed generator (the learner seeds it), so runs stay reproducible.
    """
    heads = {id(network.policy_head): 0.01, id(network.baseline_head): 1.0}
    for torso in (network.torso, network.value_torso):
        if torso is None:
            continue
        for layer in torso._flatten_layers(include_self=False):
            if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense)):
                _reinit(layer, math.sqrt(2.0), seed)
    _reinit(network.policy_head, heads[id(network.policy_head)], seed)
    _reinit(network.baseline_head, heads[id(network.baseline_head)], seed)
