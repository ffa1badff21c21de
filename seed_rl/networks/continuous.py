"""Networks for continuous control: SAC's MLP actor-critic (the original's ``agents/sac/networks.py``
``ActorCriticMLP``) and the on-policy family's policy-and-value MLPs (the original's
``agents/policy_gradient/modules/continuous_control_agent.py`` ``ContinuousControlAgent``).

Observations are vectors ``[..., D]`` (any leading dimensions: ``[B]`` at inference, ``[T, B]`` in a loss); the
networks are feed-forward, so their recurrent state is ``()``.
"""

from __future__ import annotations

import math
from typing import Sequence

import keras
import tensorflow as tf

from seed_rl.networks.actor_critic import ActorCriticOutput
from seed_rl.types import EnvOutput

__all__ = ["MLP", "ContinuousControlNetwork", "SACNetwork"]


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


class ContinuousControlNetwork(keras.Model):
    """The on-policy family's control network: a policy MLP (-> the distribution's ``param_size`` parameters) and
    a separate value MLP (-> V), each hidden layer ``Dense -> [LayerNorm] -> activation`` with orthogonal
    initialisation (gain sqrt 2; the policy's last layer 0.01, the value's 1.0, as ``mujoco/gin/ppo.gin``).

    With ``std_independent_of_input`` the policy outputs the means only and the std parameters are a trainable
    vector (zeros at the start) appended to them. ``observation_normalizer`` (a mean/std tracker of
    ``seed_rl.ops.normalization``, updated by the agent's loss) normalises observations, then they are clipped to
    ``+-input_clipping``. Feed-forward: the recurrent state is ``()``. Called like `ActorCriticNetwork`.
    """

    def __init__(self, param_size: int, sizes: Sequence[int] = (64, 64), activation: str = "tanh",
                 std_independent_of_input: bool = False, layer_norm: bool = False,
                 observation_normalizer=None, input_clipping: float | None = None, **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        if std_independent_of_input and param_size % 2:
            raise ValueError("std_independent_of_input needs a normal distribution (means then std parameters)")
        self.param_size = int(param_size)
        self.std_independent_of_input = bool(std_independent_of_input)
        self.observation_normalizer = observation_normalizer
        self.input_clipping = input_clipping
        hidden = keras.initializers.Orthogonal(math.sqrt(2.0))

        def tower(name, outputs, gain):
            layers = []
            for i, n in enumerate(sizes):
                layers.append(keras.layers.Dense(int(n), kernel_initializer=hidden, name=f"{name}_{i}"))
                if layer_norm:
                    layers.append(keras.layers.LayerNormalization(name=f"{name}_norm_{i}"))
                layers.append(keras.layers.Activation(activation))
            layers.append(keras.layers.Dense(outputs, kernel_initializer=keras.initializers.Orthogonal(gain),
                                             name=f"{name}_out"))
            return layers

        outputs = self.param_size // 2 if self.std_independent_of_input else self.param_size
        self.policy_layers = tower("policy", outputs, 0.01)
        self.value_layers = tower("value", 1, 1.0)
        self.std_param = (self.add_weight(shape=(self.param_size // 2,), initializer="zeros", name="std_param")
                          if self.std_independent_of_input else None)

    def initial_state(self, batch_size: int):
        del batch_size
        return ()

    def call(self, prev_actions, env_outputs: EnvOutput, core_state, unroll: bool = False):
        del prev_actions, unroll  # feed-forward over any leading dimensions
        x = _vector(env_outputs.observation)
        if self.observation_normalizer is not None:
            x = self.observation_normalizer.normalize(x)
        if self.input_clipping:
            x = tf.clip_by_value(x, -self.input_clipping, self.input_clipping)
        policy, value = x, x
        for layer in self.policy_layers:
            policy = layer(policy)
        for layer in self.value_layers:
            value = layer(value)
        if self.std_param is not None:
            std = tf.broadcast_to(tf.convert_to_tensor(self.std_param), tf.concat([tf.shape(policy)[:-1],
                                                                                   [self.param_size // 2]], 0))
            policy = tf.concat([policy, std], axis=-1)
        return ActorCriticOutput(policy_logits=policy, baseline=tf.squeeze(value, -1)), core_state
