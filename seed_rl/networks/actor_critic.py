"""The actor-critic network of the V-trace agent: torso -> [reward, previous action] -> LSTM -> policy and value.

Shapes: T = unroll length, B = batch. With ``unroll=False`` every input has a leading ``[B]`` (one step, used by the
learner's inference step); with ``unroll=True`` a leading ``[T, B]`` (used by the loss). The recurrent state is a
tuple ``(h, c)`` (or ``()`` without LSTM) of ``[B, ...]`` tensors; it is reset to zero at steps where ``done``.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import keras
import tensorflow as tf

from seed_rl.networks.multi_input import MultiInputTorso
from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.networks.torsos import ImpalaDeepTorso, ImpalaShallowTorso, SmallConvTorso, mlp_torso
from seed_rl.types import EnvOutput, ObservationSpec, one_hot_depth


def _merge_time_and_batch(observation) -> tf.Tensor:
    observation = tf.convert_to_tensor(observation)
    flat = tf.reshape(observation, tf.concat([[-1], tf.shape(observation)[2:]], 0))
    if observation.shape.rank is not None:
        flat = tf.ensure_shape(flat, [None] + observation.shape[2:].as_list())
    return flat


class ActorCriticOutput(NamedTuple):
    policy_logits: Any
    """float32 [..., num_actions] (or the distribution's parameter size)."""
    baseline: Any
    """float32 [...]: the state value V(o_t)."""


class ActorCriticNetwork(keras.Model):
    """IMPALA-style actor-critic.

    Args:
      torso: a layer mapping observations ``[N, ...]`` (or a dict of them) to features ``[N, F]``.
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
        t_b = tf.shape(env_outputs.reward)[:2]
        # [T, B, ...] -> [T * B, ...], for each array of a dict observation alike.
        flat_obs = tf.nest.map_structure(_merge_time_and_batch, env_outputs.observation)
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
                       use_reward_and_action: bool = False,
                       observation_spec: ObservationSpec | None = None) -> ActorCriticNetwork:
    """The actor-critic network the actor-critic agents' configs name: ``network`` is ``impala_deep``,
    ``impala_shallow`` (image observations), ``gfootball`` (the original's Football network: the deep ResNet with
    four sections 16-32-32-32 and lecun-normal kernels, also in its heads), ``small_conv`` (small images: the
    MinAtar paper's one convolution and dense 128), ``mlp`` (vector observations) or ``multi_input`` (dict
    observations: `seed_rl.networks.multi_input`); ``mlp`` and ``multi_input`` get an own value torso when
    ``separate_value_network``.

    ``observation_spec`` (the env's; None: not checked) must be a dict for ``multi_input`` and one array for the
    others: the error says which network takes it.
    """
    if observation_spec is not None:
        is_dict = isinstance(observation_spec, Mapping)
        if network == "multi_input" and not is_dict:
            raise ValueError(f"network=multi_input takes a dict observation; this env's is one array "
                             f"{observation_spec}: name another network, or none (the observation spec chooses)")
        if network != "multi_input" and is_dict:
            raise ValueError(f"network={network} takes one array observation; this env's is a dict: "
                             f"{observation_spec}: use network=multi_input (the default for dict observations)")
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
        depth = one_hot_depth(observation_spec)
        torso = mlp_torso(mlp_sizes, one_hot_depth=depth)
        if separate_value_network:
            value_torso = mlp_torso(mlp_sizes, one_hot_depth=depth)
    elif network == "multi_input":
        if not isinstance(observation_spec, Mapping):
            raise ValueError("network=multi_input is built for the keys of a dict observation: pass its spec")
        torso = MultiInputTorso(observation_spec, mlp_sizes)
        if separate_value_network:
            value_torso = MultiInputTorso(observation_spec, mlp_sizes)
    else:
        raise ValueError(f"network must be impala_deep, impala_shallow, gfootball, small_conv, mlp or multi_input, "
                         f"got {network!r}")
    return ActorCriticNetwork(torso, num_actions=num_actions, policy_size=policy_size, lstm_size=lstm_size,
                              use_reward_and_action=use_reward_and_action, value_torso=value_torso,
                              head_initializer=head_initializer)
