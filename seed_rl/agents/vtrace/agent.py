"""The V-trace (IMPALA) agent: an actor-critic network acting through a categorical policy, trained off-policy
with V-trace targets. It plugs into the algorithm-agnostic learner through the ``seed_rl.types.Agent`` protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import tensorflow as tf

from seed_rl.agents.optimizer import make_optimizer
from seed_rl.agents.vtrace.config import VTraceConfig
from seed_rl.agents.vtrace.loss import compute_loss
from seed_rl.networks import ActorCriticNetwork, build_actor_critic, checkpoint_variables, orthogonal_init
from seed_rl.ops.distributions import Categorical, get_distribution
from seed_rl.ops.policy_losses import EntropyCost
from seed_rl.ops.specs import zeros_env_output
from seed_rl.types import Agent, ArraySpec, EnvOutput, LossResult, ObservationSpec, QueueFeed, UpdateSchedule


class AgentOutput(NamedTuple):
    action: Any
    """int32 [B]: the sampled action a_t."""
    policy_logits: Any
    """float32 [B, A]: the behaviour policy mu's logits."""
    baseline: Any
    """float32 [B]: V(o_t) at acting time."""


def build_network(config: VTraceConfig, observation_spec: ObservationSpec, action_spec: ArraySpec,
                  policy_size: int) -> ActorCriticNetwork:
    return build_actor_critic(config.network, max(action_spec.num_values, 1), policy_size, config.mlp_sizes,
                              config.separate_value_network, config.lstm_size, config.use_reward_and_action,
                              observation_spec=observation_spec)


class VTraceAgent:
    """Acts with the actor-critic network and computes the V-trace loss."""

    name = "vtrace"
    feed = QueueFeed()  # each unroll trains once (IMPALA's on-policy-ish queue, corrected by V-trace)
    schedule = UpdateSchedule()  # one update per batch
    num_overlapping_steps = 0
    trains_transitions = False  # whole sequences only (V-trace runs over the unroll)

    def __init__(self, config: VTraceConfig, observation_spec: ObservationSpec, action_spec: ArraySpec,
                 num_envs: int = 1, num_eval_envs: int = 0):
        del num_envs, num_eval_envs  # the same policy acts in every env
        self.config = config
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        # Categorical for one discrete action, multi-categorical, or a tanh-squashed normal for a [-1, 1] Box
        # (get_distribution refuses anything else with the reason).
        self.distribution = get_distribution(action_spec)
        if config.use_reward_and_action and not isinstance(self.distribution, Categorical):
            raise ValueError(f"use_reward_and_action feeds a one-hot previous action: it needs one discrete action; "
                             f"this env's action spec is {action_spec} (pass --use_reward_and_action=false)")
        self.network = build_network(config, observation_spec, action_spec, self.distribution.param_size())
        self.entropy_cost = EntropyCost(config.entropy_cost, config.entropy_cost_adjustment_speed,
                                        adapts=config.target_entropy is not None)
        self._build()
        if config.initializer == "orthogonal":
            orthogonal_init(self.network, seed=None)

    # -- Agent protocol --------------------------------------------------------------------------------------
    def initial_state(self, batch_size):
        return self.network.initial_state(batch_size)

    def act(self, prev_actions, env_outputs: EnvOutput, agent_state, env_ids=None):
        """One step for a batch of envs ``[B]``; ``env_ids`` is unused (the policy is the same for every env)."""
        outputs, new_state = self.network(prev_actions, env_outputs, agent_state, unroll=False)
        action = self.distribution.sample(outputs.policy_logits)
        return AgentOutput(tf.cast(action, self._action_dtype), outputs.policy_logits, outputs.baseline), new_state

    def loss(self, unroll, weights=None) -> LossResult:
        del weights  # on-policy queue: every unroll counts once
        return compute_loss(self.config, self.network, self.distribution, self.entropy_cost, unroll)

    def update_targets(self, update):
        del update  # no target network
        return tf.constant(False)

    def greedy_action(self, agent_outputs) -> tf.Tensor:
        return tf.cast(self.distribution.mode(agent_outputs.policy_logits), self._action_dtype)

    @property
    def trainable_variables(self):
        return list(self.network.trainable_variables) + self.entropy_cost.trainable()

    @property
    def policy_variables(self):
        return checkpoint_variables(self.network)

    def checkpoint_items(self) -> dict:
        return {"network": checkpoint_variables(self.network), **self.entropy_cost.checkpoint_items()}

    def make_optimizer(self, total_updates: int):
        return make_optimizer(self.config.optimizer, total_updates)

    def agent_output_spec(self, batch_size=None):
        return AgentOutput(
            action=tf.TensorSpec([batch_size, *self.action_spec.shape], self._action_dtype),
            policy_logits=tf.TensorSpec([batch_size, self.distribution.param_size()], tf.float32),
            baseline=tf.TensorSpec([batch_size], tf.float32),
        )

    # -- helpers -----------------------------------------------------------------------------------------------
    def _build(self) -> None:
        """Creates the variables by running one step on zeros."""
        env_output = zeros_env_output(self.observation_spec, 1)
        self.act(tf.zeros([1, *self.action_spec.shape], self._action_dtype), env_output, self.initial_state(1))

    @property
    def _action_dtype(self):
        return tf.as_dtype(self.action_spec.dtype)


if TYPE_CHECKING:  # mypy checks that the class follows the Agent protocol the learner relies on

    def _follows_the_agent_protocol(agent: VTraceAgent) -> Agent:
        return agent
