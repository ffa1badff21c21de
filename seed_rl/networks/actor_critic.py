"""The actor-critic network of the V-trace agent: torso -> [reward, previous action] -> LSTM -> policy and value.

Shapes: T = unroll length, B = batch. With ``unroll=False`` every input has a leading ``[B]`` (one step, used by the
learner's inference step); with ``unroll=True`` a leading ``[T, B]`` (used by the loss). The recurrent state is a
tuple ``(h, c)`` (or ``()`` without LSTM) of ``[B, ...]`` tensors; it is reset to zero at steps where ``done``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import tensorflow as tf

from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.networks.torsos import ImpalaDeepTorso, ImpalaShallowTorso, MLPTorso, SmallConvTorso
from seed_rl.types import EnvOutput


class ActorCriticOutput(NamedTuple):
    policy_logits: Any
    """float32 [..., num_actions] (or the distribution's parameter size)."""
    baseline: Any
    """float32 [...]: the state value V(o_t)."""


class ActorCriticNetwork(keras.Model):
    """IMPALA-style actor-critic.

    Args:
      torso: a layer mapping observations ``[N, ...]`` to features ``[N, F]``.
      num_actions: number of discrete actions (the size of the one-hot previous action).
      policy_size: size of the policy parameters (``num_actions`` for a categorical policy).
      lstm_size: LSTM units; 0 for a feed-forward core.
      use_reward_and_action: concatenate the clipped reward and the one-hot previous action to the torso features
        before the core (the original's DMLab/Atari network); the MLP network of the original does not.
      value_torso: optional separate torso for the value head (feed-forward networks only); without it the policy
        and the value share the torso, as in the original.
    """

    def __init__(self, torso: keras.layers.Layer, num_actions: int, policy_size: int | None = None,
                 lstm_size: int = 256, use_reward_and_action: bool = True,
                 value_torso: keras.layers.Layer | None = None, head_initializer="glorot_uniform", **kwargs):
        # Under a mixed-precision policy (the learner's --precision) only the torsos compute in the low precision:
        # this network, its LSTM and its heads keep float32 (kwargs may say otherwise).
        super().__init__(**{"dtype": "float32", **kwargs})
        if value_torso is not None and lstm_size:
            raise ValueError("a separate value torso is only supported without an LSTM core")
        self.torso = torso
        self.value_torso = value_torso
        self.num_actions = int(num_actions)
        self.use_reward_and_action = use_reward_and_action
        self.core = ResettingLSTM(lstm_size, dtype=self.dtype_policy) if lstm_size else None
        self.policy_head = keras.layers.Dense(policy_size or num_actions, name="policy_logits",
                                              kernel_initializer=head_initializer, dtype=self.dtype_policy)
        self.baseline_head = keras.layers.Dense(1, name="baseline", kernel_initializer=head_initializer,
                                                dtype=self.dtype_policy)

    def initial_state(self, batch_size: int):
        if self.core is None:
            return ()
        return self.core.initial_state(batch_size)

    def call(self, prev_actions, env_outputs: EnvOutput, core_state, unroll: bool = False):
        if not unroll:
            prev_actions, env_outputs = tf.nest.map_structure(
                lambda t: tf.expand_dims(t, 0), (prev_actions, env_outputs))
        outputs, core_state = self._unroll(prev_actions, env_outputs, core_state)
        if not unroll:
            outputs = tf.nest.map_structure(lambda t: tf.squeeze(t, 0), outputs)
        return outputs, core_state

    def _unroll(self, prev_actions, env_outputs: EnvOutput, core_state):
        observation = env_outputs.observation
        t_b = tf.shape(env_outputs.reward)[:2]
        flat_obs = tf.reshape(observation, tf.concat([[-1], tf.shape(observation)[2:]], 0))
        if isinstance(observation, tf.Tensor) and observation.shape.rank is not None:
            flat_obs = tf.ensure_shape(flat_obs, [None] + observation.shape[2:].as_list())
        features = self._encode(self.torso, flat_obs, t_b)
        if self.use_reward_and_action:
            reward = tf.clip_by_value(tf.cast(env_outputs.reward, tf.float32), -1.0, 1.0)[..., None]
            one_hot = tf.one_hot(tf.cast(prev_actions, tf.int32), self.num_actions)
            features = tf.concat([features, reward, one_hot], axis=-1)
        if self.core is not None:
            features, core_state = self.core(features, tf.cast(env_outputs.done, tf.bool), core_state)
        logits = self.policy_head(features)
        value_features = features if self.value_torso is None else self._encode(self.value_torso, flat_obs, t_b)
        baseline = tf.squeeze(self.baseline_head(value_features), -1)
        return ActorCriticOutput(policy_logits=logits, baseline=baseline), core_state

    @staticmethod
    def _encode(torso, flat_obs, t_b):
        features = tf.cast(torso(flat_obs), tf.float32)
        return tf.reshape(features, tf.concat([t_b, [features.shape[-1]]], 0))


def build_actor_critic(network: str, num_actions: int, policy_size: int | None = None, mlp_sizes=(64, 64),
                       separate_value_network: bool = False, lstm_size: int = 0,
                       use_reward_and_action: bool = False) -> ActorCriticNetwork:
    """The actor-critic network the actor-critic agents' configs name: ``network`` is ``impala_deep``,
    ``impala_shallow`` (image observations), ``gfootball`` (the original's Football network: the deep ResNet with
    four sections 16-32-32-32 and lecun-normal kernels, also in its heads), ``small_conv`` (small images: the
    MinAtar paper's one convolution and dense 128) or ``mlp`` (vector observations, with an own value torso when
    ``separate_value_network``)."""
    value_torso = None
    head_initializer = "glorot_uniform"
    if network == "impala_deep":
        torso: keras.layers.Layer = ImpalaDeepTorso()
    elif network == "gfootball":
        torso = ImpalaDeepTorso(channels=(16, 32, 32, 32), kernel_initializer="lecun_normal")
        head_initializer = "lecun_normal"
    elif network == "impala_shallow":
        torso = ImpalaShallowTorso()
    elif network == "small_conv":
        torso = SmallConvTorso()
    elif network == "mlp":
        torso = MLPTorso(mlp_sizes)
        if separate_value_network:
            value_torso = MLPTorso(mlp_sizes)
    else:
        raise ValueError(f"network must be impala_deep, impala_shallow, gfootball, small_conv or mlp, got {network!r}")
    return ActorCriticNetwork(torso, num_actions=num_actions, policy_size=policy_size, lstm_size=lstm_size,
                              use_reward_and_action=use_reward_and_action, value_torso=value_torso,
                              head_initializer=head_initializer)
