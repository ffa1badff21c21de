"""The SAC agent: a tanh-squashed (or clipped) normal policy and twin critics on MLPs (or the original's LSTM
actor-critic), trained from a uniform replay of short unrolls, with a Polyak-averaged target network and a trainable entropy coefficient. It plugs into
the learner through the ``seed_rl.types.Agent`` protocol: a replay feed without priorities, and ``update_targets``
for the Polyak average."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import tensorflow as tf

from seed_rl.agents.optimizer import make_optimizer
from seed_rl.agents.sac.config import SACConfig
from seed_rl.agents.sac.loss import compute_loss
from seed_rl.networks import checkpoint_variables
from seed_rl.networks.continuous import SACLSTMNetwork, SACNetwork
from seed_rl.ops.distributions import Normal, get_distribution
from seed_rl.ops.policy_losses import EntropyCost
from seed_rl.types import Agent, ArraySpec, EnvOutput, LossResult, ObservationSpec, ReplayFeed, UpdateSchedule


class AgentOutput(NamedTuple):
    action: Any
    """float32 [B, A]: the sampled action, in [-1, 1]."""
    policy_params: Any
    """float32 [B, 2 A]: the policy's distribution parameters (means, then raw std parameters)."""


def _check_specs(observation_spec: ObservationSpec, action_spec: ArraySpec) -> None:
    if not isinstance(observation_spec, ArraySpec) or len(observation_spec.shape) != 1:
        raise ValueError(f"the sac agent's MLP networks take one vector observation (shape (D,)); this env's is "
                         f"{observation_spec}")
    if action_spec.num_values > 0:
        raise ValueError(f"the sac agent takes continuous actions (a float Box); this env's action spec "
                         f"{action_spec} is discrete: use --agent=r2d2, vtrace or ppo")


class SACAgent:
    """Acts with the policy network and computes the SAC loss."""

    schedule = UpdateSchedule()  # one update per sampled batch
    num_overlapping_steps = 0
    trains_transitions = False  # replayed sequences

    def __init__(self, config: SACConfig, observation_spec: ObservationSpec, action_spec: ArraySpec,
                 num_envs: int = 1, num_eval_envs: int = 0):
        del num_envs, num_eval_envs  # the same policy acts in every env
        _check_specs(observation_spec, action_spec)
        self.config = config
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        self.distribution = get_distribution(action_spec, config.continuous_distribution)
        assert isinstance(self.distribution, Normal)
        self.feed = ReplayFeed(capacity=config.replay_buffer_size, min_size=config.replay_buffer_min_size,
                               replay_ratio=config.replay_ratio)  # uniform: no priorities, weights of 1
        self.network = self._build_network()
        self.target_network = self._build_network()
        for target, online in zip(self.target_network.variables, self.network.variables):
            target.assign(online)
        self.entropy_cost = EntropyCost(config.entropy_cost, config.entropy_cost_adjustment_speed,
                                        adapts=config.target_entropy is not None)

    def _build_network(self):
        c = self.config
        action_size = int(self.action_spec.shape[0])
        assert isinstance(self.observation_spec, ArraySpec)  # _check_specs
        size = int(self.observation_spec.shape[0])
        if c.network == "lstm":
            return SACLSTMNetwork(size, action_size, self.distribution.param_size(), num_critics=c.num_critics,
                                  lstm_sizes=c.lstm_sizes, pre_mlp_sizes=c.pre_mlp_sizes,
                                  post_mlp_sizes=c.post_mlp_sizes, ff_mlp_sizes=c.ff_mlp_sizes,
                                  activation=c.activation)
        return SACNetwork(size, action_size, self.distribution.param_size(), num_critics=c.num_critics,
                          mlp_sizes=c.mlp_sizes, activation=c.activation)

    # -- Agent protocol --------------------------------------------------------------------------------------
    def initial_state(self, batch_size):
        return self.network.initial_state(batch_size)

    def act(self, prev_actions, env_outputs: EnvOutput, agent_state, env_ids=None):
        """Samples from the policy (in every env, evaluation included: ``seed-rl eval --greedy`` takes the mode);
        the LSTM network advances every head's state (as the original's ``ActorCriticLSTM``)."""
        del env_ids
        step = tf.nest.map_structure(lambda t: t[None], (prev_actions, env_outputs))  # one time step
        features, new_state = self.network.features(step[0], step[1], agent_state)
        params = self.network.action_params(features)[0]
        return AgentOutput(self.distribution.sample(params), params), new_state

    def loss(self, unroll, weights=None) -> LossResult:
        del weights  # uniform replay: every weight is 1
        return compute_loss(self.config, self.network, self.target_network, self.distribution, self.entropy_cost,
                            unroll)

    def update_targets(self, update):
        """``target <- polyak target + (1 - polyak) online`` every ``update_target_every_n_step`` updates."""
        c = self.config

        def average():
            for target, online in zip(self.target_network.variables, self.network.variables):
                target.assign(c.polyak * target + (1.0 - c.polyak) * online)
            return tf.constant(True)

        return tf.cond(tf.equal(update % c.update_target_every_n_step, 0), average, lambda: tf.constant(False))

    def greedy_action(self, agent_outputs) -> tf.Tensor:
        return self.distribution.mode(agent_outputs.policy_params)

    @property
    def trainable_variables(self):
        return list(self.network.trainable_variables) + self.entropy_cost.trainable()

    @property
    def policy_variables(self):
        if self.config.network == "lstm":  # acting advances every head's LSTM
            return checkpoint_variables(self.network)
        return checkpoint_variables(self.network.actor)

    def checkpoint_items(self) -> dict:
        return {"network": checkpoint_variables(self.network),
                "target_network": checkpoint_variables(self.target_network),
                **self.entropy_cost.checkpoint_items()}

    def make_optimizer(self, total_updates: int):
        return make_optimizer(self.config.optimizer, total_updates)

    def agent_output_spec(self, batch_size=None):
        a = int(self.action_spec.shape[0])
        return AgentOutput(action=tf.TensorSpec([batch_size, a], tf.float32),
                           policy_params=tf.TensorSpec([batch_size, self.distribution.param_size()], tf.float32))


if TYPE_CHECKING:  # mypy checks that the class follows the Agent protocol the learner relies on

    def _follows_the_agent_protocol(agent: SACAgent) -> Agent:
        return agent
