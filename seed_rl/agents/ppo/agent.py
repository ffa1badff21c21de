"""The PPO agent: an actor-critic network acting through a categorical policy, trained on each batch of unrolls
for several epochs of minibatches with the clipped surrogate, GAE advantages, a value loss and an entropy bonus.
It is assembled from the on-policy family's parts in ``seed_rl/ops`` (advantages, policy_losses) and plugs into
the learner through the ``seed_rl.types.Agent`` protocol (a queue feed and an update schedule)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import keras
import tensorflow as tf

from seed_rl.agents.ppo.config import PPOConfig
from seed_rl.agents.ppo.loss import compute_loss
from seed_rl.networks import build_actor_critic, checkpoint_variables
from seed_rl.ops.distributions import Categorical
from seed_rl.ops.specs import zeros_env_output
from seed_rl.types import Agent, ArraySpec, EnvOutput, LossResult, ObservationSpec, QueueFeed, UpdateSchedule


class AgentOutput(NamedTuple):
    action: Any
    """int32 [B]: the sampled action."""
    policy_logits: Any
    """float32 [B, A]: the behaviour policy's logits."""
    baseline: Any
    """float32 [B]: V(o_t) at acting time (PPO-style value clipping is around it)."""


class PPOAgent:
    """Acts with the actor-critic network and computes the PPO loss."""

    feed = QueueFeed()  # on-policy: each unroll is trained on (for `epochs` passes) once it arrives
    num_overlapping_steps = 0

    def __init__(self, config: PPOConfig, observation_spec: ObservationSpec, action_spec: ArraySpec,
                 num_envs: int = 1, num_eval_envs: int = 0):
        del num_envs, num_eval_envs  # the same policy acts in every env
        if action_spec.num_values <= 0 or tuple(action_spec.shape) != ():
            kind = "continuous" if action_spec.num_values <= 0 else "multi-discrete"
            raise ValueError(f"the ppo agent takes one discrete action per step (an int32 scalar with num_values > 0) "
                             f"so far; this env's {kind} action spec {action_spec} is not supported yet")
        self.config = config
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        self.distribution = Categorical(action_spec.num_values)
        self.network = build_actor_critic(config.network, action_spec.num_values, None, config.mlp_sizes,
                                          config.separate_value_network and not config.lstm_size, config.lstm_size,
                                          config.use_reward_and_action)
        self.schedule = UpdateSchedule(epochs=config.epochs, minibatches=config.minibatches)
        self.act(tf.zeros([1], tf.int32), zeros_env_output(observation_spec, 1), self.initial_state(1))

    # -- Agent protocol --------------------------------------------------------------------------------------
    def initial_state(self, batch_size):
        return self.network.initial_state(batch_size)

    def act(self, prev_actions, env_outputs: EnvOutput, agent_state, env_ids=None):
        """One step for a batch of envs ``[B]``; ``env_ids`` is unused (the policy is the same for every env)."""
        del env_ids
        outputs, new_state = self.network(prev_actions, env_outputs, agent_state, unroll=False)
        action = self.distribution.sample(outputs.policy_logits)
        return AgentOutput(tf.cast(action, tf.int32), outputs.policy_logits, outputs.baseline), new_state

    def loss(self, unroll, weights=None) -> LossResult:
        del weights  # on-policy queue: every unroll counts once
        return compute_loss(self.config, self.network, self.distribution, unroll)

    def update_targets(self, update):
        del update  # no target network
        return tf.constant(False)

    def greedy_action(self, agent_outputs) -> tf.Tensor:
        return self.distribution.mode(agent_outputs.policy_logits)

    @property
    def trainable_variables(self):
        return list(self.network.trainable_variables)

    @property
    def policy_variables(self):
        return checkpoint_variables(self.network)

    def checkpoint_items(self) -> dict:
        return {"network": checkpoint_variables(self.network)}

    def make_optimizer(self, total_updates: int):
        c = self.config
        lr: Any = c.learning_rate
        if c.lr_schedule == "linear":
            lr = keras.optimizers.schedules.PolynomialDecay(c.learning_rate, decay_steps=max(int(total_updates), 1),
                                                            end_learning_rate=0.0)
        return keras.optimizers.Adam(learning_rate=lr, epsilon=c.adam_epsilon, global_clipnorm=c.clip_norm or None)

    def agent_output_spec(self, batch_size=None):
        return AgentOutput(action=tf.TensorSpec([batch_size], tf.int32),
                           policy_logits=tf.TensorSpec([batch_size, self.action_spec.num_values], tf.float32),
                           baseline=tf.TensorSpec([batch_size], tf.float32))


if TYPE_CHECKING:  # mypy checks that the class follows the Agent protocol the learner relies on

    def _follows_the_agent_protocol(agent: PPOAgent) -> Agent:
        return agent
