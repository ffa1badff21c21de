"""Networks for continuous control: SAC's MLP and LSTM actor-critics (the original's ``agents/sac/networks.py``
``ActorCriticMLP`` and ``ActorCriticLSTM``) and the on-policy family's policy-and-value MLPs (the original's
``agents/policy_gradient/modules/continuous_control_agent.py`` ``ContinuousControlAgent``).

Observations are vectors ``[..., D]`` (any leading dimensions: ``[B]`` at inference, ``[T, B]`` in a loss). The
MLP networks are feed-forward (recurrent state ``()``); ``SACLSTMNetwork`` carries one LSTM state per head.

Under a mixed-precision policy (the learner's ``--precision``) the hidden layers of the MLPs compute in the low
precision; the LSTMs and every output layer (the heads) keep float32, so the losses see float32 outputs, as
with the other families' torsos and heads.

SAC's networks share one interface, which its loss uses: ``features(prev_actions, env_outputs, state)`` over
time-major ``[T, B]`` inputs gives ``(features, final state)``, a nest with leading ``[T, B]`` (sliced over time
by the loss), and ``action_params(features)``, ``value(features)``, ``q_values(features, action)`` read it.
"""

from __future__ import annotations

import math
from typing import Sequence

import keras
import tensorflow as tf

from seed_rl.networks.actor_critic import ActorCriticOutput
from seed_rl.networks.recurrent import ResettingLSTM
from seed_rl.types import EnvOutput

__all__ = ["MLP", "ContinuousControlNetwork", "SACLSTMNetwork", "SACNetwork"]


class MLP(keras.layers.Layer):
    """Dense layers of ``sizes`` with ``activation``, then a linear output layer of ``output_size`` units."""

    def __init__(self, sizes: Sequence[int], output_size: int, activation: str = "relu", **kwargs):
        super().__init__(**kwargs)
        self.hidden = [keras.layers.Dense(int(n), activation=activation) for n in sizes]
        self.out = keras.layers.Dense(int(output_size), dtype="float32")  # a head: float32 under any policy

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

    def features(self, prev_actions, env_outputs: EnvOutput, state):
        """The observations (feed-forward: nothing else is needed), state ``()``."""
        del prev_actions
        return _vector(env_outputs.observation), state

    def action_params(self, observation) -> tf.Tensor:
        return self.actor(_vector(observation))

    def q_values(self, observation, action) -> tf.Tensor:
        x = tf.concat([_vector(observation), tf.cast(action, tf.float32)], axis=-1)
        return tf.concat([critic(x) for critic in self.critics], axis=-1)

    def value(self, observation) -> tf.Tensor:
        return tf.squeeze(self.value_net(_vector(observation)), -1)

    def call(self, observation):
        return self.action_params(observation)


def _mlp(sizes: Sequence[int], activation: str, name: str) -> keras.Sequential:
    """The original's ``create_mlp``: Dense layers of ``sizes``, the hidden ones with ``activation``, the last one
    linear and float32 under any dtype policy (its output goes into an LSTM, a concatenation or a head)."""
    sizes = [int(n) for n in sizes]
    last = len(sizes) - 1
    return keras.Sequential([keras.layers.Dense(n, activation=activation if i < last else None,
                                                **({"dtype": "float32"} if i == last else {}))
                             for i, n in enumerate(sizes)], name=name)


class _RecurrentBranch(keras.layers.Layer):
    """The original's ``LSTMwithFeedForwardBranch`` (arXiv 1710.06537): ``pre-MLP -> stacked LSTM`` on the
    recurrent input (resetting where ``done``), a parallel feed-forward MLP on the feed-forward input, and a
    post-MLP on both outputs concatenated (its last layer: the head's output)."""

    def __init__(self, lstm_sizes, pre_sizes, post_sizes, ff_sizes, activation: str, **kwargs):
        super().__init__(**kwargs)
        self.pre = _mlp(pre_sizes, activation, "pre_mlp")
        self.cores = [ResettingLSTM(int(n), name=f"lstm_{i}", dtype="float32") for i, n in enumerate(lstm_sizes)]
        self.ff = _mlp(ff_sizes, activation, "ff_mlp")
        self.post = _mlp(post_sizes, activation, "post_mlp")

    def initial_state(self, batch_size):
        return tuple(core.initial_state(batch_size) for core in self.cores)

    def core(self, recurrent_input, done, state):
        """[T, B, F], [T, B], the state -> (LSTM outputs [T, B, H], final state)."""
        x = self.pre(recurrent_input)
        final = []
        for core, core_state in zip(self.cores, state):
            x, new_state = core(x, done, core_state)
            final.append(new_state)
        return x, tuple(final)

    def head(self, core_output, ff_input):
        return self.post(tf.concat([self.ff(ff_input), core_output], axis=-1))


class SACLSTMNetwork(keras.Model):
    """SAC's recurrent actor-critic (the original's ``ActorCriticLSTM``): the policy, V and each of the
    ``num_critics`` Q-functions are each a :class:`_RecurrentBranch` with its own LSTM state. Every branch's
    recurrent input is the observation and the previous action; the feed-forward input is the observation (the
    policy, V) or the observation and the action being valued (Q). The state is the tuple of the branches' states
    (policy, V, Q_1, ...), each a tuple of ``(h, c)`` per LSTM layer; acting advances all of them.

    ``features`` runs the branches' LSTMs once over a sequence; the heads then read them, so a Q-function is
    evaluated at several actions without re-running its LSTM (the original re-ran it per call)."""

    def __init__(self, observation_size: int, action_size: int, param_size: int, num_critics: int = 2,
                 lstm_sizes: Sequence[int] = (256,), pre_mlp_sizes: Sequence[int] = (256,),
                 post_mlp_sizes: Sequence[int] = (256,), ff_mlp_sizes: Sequence[int] = (256,),
                 activation: str = "relu", **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        if num_critics < 1:
            raise ValueError(f"num_critics must be >= 1, got {num_critics}")
        if not lstm_sizes or not pre_mlp_sizes or not ff_mlp_sizes:
            raise ValueError("the SAC LSTM network needs at least one LSTM layer, one pre-MLP layer and one "
                             f"feed-forward layer; got lstm_sizes={tuple(lstm_sizes)}, pre_mlp_sizes="
                             f"{tuple(pre_mlp_sizes)}, ff_mlp_sizes={tuple(ff_mlp_sizes)}")
        self.observation_size = int(observation_size)
        self.action_size = int(action_size)

        def branch(output_size, name):
            return _RecurrentBranch(lstm_sizes, pre_mlp_sizes, [*post_mlp_sizes, output_size], ff_mlp_sizes,
                                    activation, name=name)

        self.actor = branch(param_size, "actor")
        self.value_net = branch(1, "value")
        self.critics = [branch(1, f"critic_{i}") for i in range(num_critics)]
        self.branches = [self.actor, self.value_net, *self.critics]
        # Build every variable now (checkpoints and the target copy need them to exist).
        env = EnvOutput(reward=tf.zeros([1, 1]), done=tf.zeros([1, 1], tf.bool),
                        observation=tf.zeros([1, 1, self.observation_size]), abandoned=tf.zeros([1, 1], tf.bool),
                        episode_step=tf.zeros([1, 1], tf.int32))
        features, _ = self.features(tf.zeros([1, 1, self.action_size]), env, self.initial_state(1))
        self.action_params(features)
        self.value(features)
        self.q_values(features, tf.zeros([1, 1, self.action_size]))

    def initial_state(self, batch_size):
        return tuple(b.initial_state(batch_size) for b in self.branches)

    def features(self, prev_actions, env_outputs: EnvOutput, state):
        """Time-major ``[T, B]`` inputs from ``state`` -> ``((observations, core outputs per branch), final
        state)``; the state is reset to zeros before every step whose ``done`` is true."""
        obs = _vector(env_outputs.observation)
        prev = tf.cast(prev_actions, tf.float32)
        if prev.shape.rank < obs.shape.rank:
            prev = prev[..., None]
        recurrent_input = tf.concat([obs, prev], axis=-1)
        done = tf.cast(env_outputs.done, tf.bool)
        outputs, final = [], []
        for b, branch_state in zip(self.branches, state):
            out, new_state = b.core(recurrent_input, done, branch_state)
            outputs.append(out)
            final.append(new_state)
        return (obs, tuple(outputs)), tuple(final)

    def action_params(self, features) -> tf.Tensor:
        obs, cores = features
        return self.actor.head(cores[0], obs)

    def value(self, features) -> tf.Tensor:
        obs, cores = features
        return tf.squeeze(self.value_net.head(cores[1], obs), -1)

    def q_values(self, features, action) -> tf.Tensor:
        obs, cores = features
        x = tf.concat([obs, tf.cast(action, tf.float32)], axis=-1)
        return tf.concat([critic.head(core, x) for critic, core in zip(self.critics, cores[2:])], axis=-1)

    def call(self, features):
        return self.action_params(features)


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
                                             name=f"{name}_out", dtype="float32"))  # a head: float32
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
