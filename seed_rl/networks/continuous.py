"""Networks for continuous control: SAC's MLP actor-critic (the original's ``agents/sac/networks.py``
``ActorCriticMLP``).

Observations are vectors ``[..., D]`` (any leading dimensions: ``[B]`` at inference, ``[T, B]`` in a loss); the
networks are feed-forward, so their recurrent state is ``()``.
"""

from __future__ import annotations

from typing import Sequence

import keras
import tensorflow as tf

__all__ = ["MLP", "SACNetwork"]


class MLP(keras.layers.Layer):
    """Dense layers of ``sizes`` with ``activation``, then a linear output layer of ``output_size`` units."""

    def __init__(self, sizes: Sequence[int], output_size: int, activation: str = "relu", **kwargs):
        super().__init__(**kwargs)
        self.hidden = [keras.layers.Dense(int(n), activation=activation) for n in sizes]
        self.out = keras.layers.Dense(int(output_size))

    def call(self, x):
        for layer in self.hidden:
            x = layer(x)
        return self.out(x)


def _vector(observation) -> tf.Tensor:
    if isinstance(observation, dict):
        raise ValueError("the continuous-control MLP networks take one vector observation; this env's is a dict")
    return tf.cast(observation, tf.float32)


class SACNetwork(keras.Model):
    """SAC's actor-critic: separate MLPs for the policy (``param_size`` distribution parameters), each of the
    ``num_critics`` Q-functions (observation and action concatenated -> 1) and the state value V (-> 1).

    Methods take observations ``[..., D]`` (and actions ``[..., A]``) over any leading dimensions:

    * ``action_params(obs) -> [..., param_size]``;
    * ``q_values(obs, action) -> [..., num_critics]``;
    * ``value(obs) -> [...]``.
    """

    def __init__(self, observation_size: int, action_size: int, param_size: int, num_critics: int = 2,
                 mlp_sizes: Sequence[int] = (256, 256), activation: str = "relu", **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        if num_critics < 1:
            raise ValueError(f"num_critics must be >= 1, got {num_critics}")
        self.observation_size = int(observation_size)
        self.action_size = int(action_size)
        self.actor = MLP(mlp_sizes, param_size, activation, name="actor")
        self.critics = [MLP(mlp_sizes, 1, activation, name=f"critic_{i}") for i in range(num_critics)]
        self.value_net = MLP(mlp_sizes, 1, activation, name="value")
        # Build every variable now (checkpoints and the target copy need them to exist).
        obs = tf.zeros([1, self.observation_size])
        self.action_params(obs)
        self.q_values(obs, tf.zeros([1, self.action_size]))
        self.value(obs)

    def initial_state(self, batch_size: int):
        del batch_size
        return ()

    def action_params(self, observation) -> tf.Tensor:
        return self.actor(_vector(observation))

    def q_values(self, observation, action) -> tf.Tensor:
        x = tf.concat([_vector(observation), tf.cast(action, tf.float32)], axis=-1)
        return tf.concat([critic(x) for critic in self.critics], axis=-1)

    def value(self, observation) -> tf.Tensor:
        return tf.squeeze(self.value_net(_vector(observation)), -1)

    def call(self, observation):
        return self.action_params(observation)
