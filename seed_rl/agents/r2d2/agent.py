"""The R2D2 agent (Kapturowski et al. 2019): a recurrent dueling Q-network acting epsilon-greedily per env (Ape-X
epsilons), trained from prioritized sequence replay with burn-in, n-step double-Q targets and value rescaling.

It plugs into the same learner as V-trace through the Agent protocol (``seed_rl.types.Agent``); what differs is
declared, not probed: ``feed`` (a prioritized replay with its settings and the initial priorities of new sequences),
``num_overlapping_steps`` (burn-in) and ``update_targets`` (the periodic target-network copy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Optional

import keras
import numpy as np
import tensorflow as tf

from seed_rl.agents.optimizer import make_optimizer
from seed_rl.agents.r2d2.config import R2D2Config
from seed_rl.agents.r2d2.loss import compute_loss, sequence_td_errors
from seed_rl.networks import ImpalaShallowTorso, MultiInputTorso, SmallConvTorso, checkpoint_variables, mlp_torso
from seed_rl.networks.dueling import DuelingLSTMDQNNet
from seed_rl.ops.priorities import sequence_priorities
from seed_rl.ops.specs import zeros_env_output
from seed_rl.ops.unrolls import time_major
from seed_rl.types import (
    Agent,
    ArraySpec,
    EnvOutput,
    LossResult,
    ObservationSpec,
    ReplayFeed,
    UpdateSchedule,
    one_hot_depth,
)


class AgentOutput(NamedTuple):
    action: Any
    """int32 [B]: the epsilon-greedy action actually taken (stored and fed back as the previous action)."""
    q_values: Any
    """float32 [B, A]: Q(o_t, .) of the acting network (rescaled space)."""


def ape_x_epsilons(num_train_envs: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X per-env exploration: epsilon_i = base^(1 + alpha * i / (N - 1)), i.e. 0.4 ... 0.4^8."""
    if num_train_envs <= 1:
        return np.full([max(num_train_envs, 0)], base, np.float32)
    i = np.arange(num_train_envs, dtype=np.float64)
    return (base ** (1.0 + alpha * i / (num_train_envs - 1))).astype(np.float32)


def build_network(config: R2D2Config, observation_spec: ObservationSpec, action_spec: ArraySpec):
    if not isinstance(observation_spec, ArraySpec):  # a dict: each key encoded by its kind, no frame stacking
        if config.torso != "multi_input":
            raise ValueError(f"R2D2's torso={config.torso} takes one array observation; this environment's is a "
                             f"dict: {observation_spec}: use torso=multi_input (the default for dict observations)")
        return DuelingLSTMDQNNet(action_spec.num_values, None, stack_size=config.stack_size,
                                 torso=MultiInputTorso(observation_spec, config.mlp_sizes),
                                 lstm_size=config.lstm_size, hidden_size=config.hidden_size)
    torso: Optional[keras.layers.Layer] = None  # None: the network's default, the Nature CNN
    if config.torso == "multi_input":
        raise ValueError(f"R2D2's torso=multi_input takes a dict observation; this environment's is one array "
                         f"{observation_spec}: name another torso, or none (the observation spec chooses)")
    if config.torso == "mlp":
        torso = mlp_torso(config.mlp_sizes, one_hot_depth=one_hot_depth(observation_spec))
    elif config.torso == "impala_shallow":
        torso = ImpalaShallowTorso(256)
    elif config.torso == "small_conv":
        torso = SmallConvTorso(128)
    return DuelingLSTMDQNNet(action_spec.num_values, tuple(observation_spec.shape), stack_size=config.stack_size,
                             torso=torso, lstm_size=config.lstm_size, hidden_size=config.hidden_size)


class R2D2Agent:
    name = "r2d2"
    schedule = UpdateSchedule()  # one update per sampled batch
    trains_transitions = False  # replayed sequences with a recurrent state

    def __init__(self, config: R2D2Config, observation_spec: ObservationSpec, action_spec: ArraySpec,
                 num_envs: int = 1, num_eval_envs: int = 0):
        if action_spec.num_values <= 0:
            raise ValueError("R2D2 needs a discrete action space")
        if num_envs <= num_eval_envs:
            raise ValueError(f"num_envs ({num_envs}) must exceed num_eval_envs ({num_eval_envs}): without training "
                             "envs nothing is ever inserted into the replay buffer")
        self.config = config
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        self.num_actions = action_spec.num_values
        self.num_overlapping_steps = config.burn_in
        self.feed = ReplayFeed(
            capacity=config.replay_buffer_size, min_size=config.replay_buffer_min_size,
            replay_ratio=config.replay_ratio, priority_exponent=config.priority_exponent,
            importance_sampling_exponent=config.importance_sampling_exponent,
            checkpointed=config.checkpoint_replay, initial_priorities=self.initial_priorities)
        epsilons = np.concatenate([ape_x_epsilons(num_envs - num_eval_envs),
                                   np.full([num_eval_envs], config.eval_epsilon, np.float32)])
        self.epsilons = tf.constant(epsilons, tf.float32)
        self.network = build_network(config, observation_spec, action_spec)
        self.target_network = build_network(config, observation_spec, action_spec)
        self._build()

    # -- Agent protocol --------------------------------------------------------------------------------------
    def initial_state(self, batch_size):
        return self.network.initial_state(batch_size)

    def act(self, prev_actions, env_outputs: EnvOutput, agent_state, env_ids=None):
        """Epsilon-greedy on the online network; env ``i`` explores with its own epsilon."""
        outputs, new_state = self.network(prev_actions, env_outputs, agent_state, unroll=False)
        q = outputs.q_values
        greedy = tf.argmax(q, axis=-1, output_type=tf.int32)
        n = tf.shape(q)[0]
        if env_ids is None:
            epsilon = tf.fill([n], tf.constant(self.config.eval_epsilon, tf.float32))
        else:
            epsilon = tf.gather(self.epsilons, env_ids)
        random_actions = tf.random.uniform([n], 0, self.num_actions, dtype=tf.int32)
        explore = tf.random.uniform([n]) < epsilon
        return AgentOutput(tf.where(explore, random_actions, greedy), q), new_state

    def loss(self, unroll, weights=None) -> LossResult:
        return compute_loss(self.config, self.network, self.target_network, unroll, weights)

    def initial_priorities(self, unrolls):
        """Priorities of freshly completed sequences ``[C, L, ...]`` (batch-major) from the Q-values stored at
        acting time, used as both online and target values (as the original; no extra forward pass)."""
        unroll = time_major(unrolls)
        suffix = tf.nest.map_structure(lambda t: t[self.config.burn_in:], unroll)
        q = suffix.agent_outputs.q_values
        delta, valid = sequence_td_errors(self.config, q, q, suffix)
        return sequence_priorities(tf.abs(delta), valid, self.config.priority_mix)

    def update_targets(self, update):
        """Copies the online weights to the target network every ``update_target_every_n_step`` updates (the
        weights are equal at the start)."""
        def copy():
            for target, online in zip(self.target_network.variables, self.network.variables):
                target.assign(online)
            return tf.constant(True)

        return tf.cond(tf.equal(update % self.config.update_target_every_n_step, 0), copy,
                       lambda: tf.constant(False))

    @property
    def trainable_variables(self):
        return list(self.network.trainable_variables)

    @property
    def policy_variables(self):
        return checkpoint_variables(self.network)

    def checkpoint_items(self) -> dict:
        return {"network": checkpoint_variables(self.network),
                "target_network": checkpoint_variables(self.target_network)}

    def make_optimizer(self, total_updates: int):
        return make_optimizer(self.config.optimizer, total_updates)

    def agent_output_spec(self, batch_size=None):
        return AgentOutput(action=tf.TensorSpec([batch_size], tf.int32),
                           q_values=tf.TensorSpec([batch_size, self.num_actions], tf.float32))

    def greedy_action(self, agent_outputs) -> tf.Tensor:
        return tf.argmax(agent_outputs.q_values, axis=-1, output_type=tf.int32)

    # -- helpers -----------------------------------------------------------------------------------------------
    def _build(self) -> None:
        env_output = zeros_env_output(self.observation_spec, 1)
        for net in (self.network, self.target_network):
            net(tf.zeros([1], tf.int32), env_output, self.initial_state(1))
        for target, online in zip(self.target_network.variables, self.network.variables):
            target.assign(online)


if TYPE_CHECKING:  # mypy checks that the class follows the Agent protocol the learner relies on

    def _follows_the_agent_protocol(agent: R2D2Agent) -> Agent:
        return agent
