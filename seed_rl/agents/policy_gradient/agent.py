"""The on-policy family's agent: an actor-critic network acting through the action spec's distribution
(categorical, multi-categorical, tanh-squashed or clipped normal), trained on each batch of unrolls for several
epochs of minibatches with the configured advantage estimator, policy loss (PPO, AWR, V-MPO, PG, V-trace), value
loss and regulariser. The named agents ``ppo``, ``awr`` and ``vmpo`` are this agent with their configs' defaults.
It plugs into the learner through the ``seed_rl.types.Agent`` protocol (a queue feed and an update schedule)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import tensorflow as tf

from seed_rl.agents.optimizer import make_optimizer
from seed_rl.agents.policy_gradient import loss as loss_lib
from seed_rl.agents.policy_gradient.config import OnPolicyConfig
from seed_rl.networks import build_actor_critic, checkpoint_variables, orthogonal_init
from seed_rl.networks.continuous import ContinuousControlNetwork
from seed_rl.ops import policy_losses
from seed_rl.ops.distributions import Categorical, get_distribution, safe_exp_std, softplus_std
from seed_rl.ops.normalization import AverageMeanStd
from seed_rl.ops.specs import zeros_env_output
from seed_rl.types import (
    Agent,
    ArraySpec,
    EnvOutput,
    LossResult,
    ObservationSpec,
    QueueFeed,
    TransitionAgent,
    UpdateSchedule,
)


class AgentOutput(NamedTuple):
    action: Any
    """[B, ...]: the sampled action (int32 for discrete specs, float32 in [-1, 1] for continuous ones)."""
    policy_logits: Any
    """float32 [B, P]: the behaviour policy's distribution parameters (logits, or means then std parameters)."""
    baseline: Any
    """float32 [B]: the value head's output at acting time (normalised under PopArt; value clipping is around it)."""


_SPLITS = {"split": "once", "split_with_advantage_recomputation": "every_epoch"}
"""The original's split batch modes as the update schedule's split."""


def _policy_loss(c: OnPolicyConfig) -> policy_losses.PolicyLoss:
    if c.policy_loss == "ppo":
        return policy_losses.ppo(c.epsilon, normalize_advantages=c.normalize_advantages,
                                 max_proximal_weight=c.max_proximal_weight if c.proximal_policy == "learner" else None)
    if c.policy_loss == "awr":
        return policy_losses.awr(c.awr_beta, c.awr_w_max)
    if c.policy_loss == "vmpo":
        return policy_losses.vmpo(c.vmpo_e_n)
    if c.policy_loss == "vtrace":
        return policy_losses.vtrace(c.max_importance_weight)
    return policy_losses.pg()


class OnPolicyAgent:
    """Acts with the actor-critic network and computes the family's loss."""

    feed = QueueFeed()  # on-policy: each unroll is trained on (for `epochs` passes) once it arrives
    num_overlapping_steps = 0

    def __init__(self, config: OnPolicyConfig, observation_spec: ObservationSpec, action_spec: ArraySpec,
                 num_envs: int = 1, num_eval_envs: int = 0):
        del num_envs, num_eval_envs  # the same policy acts in every env
        c = self.config = config
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        std_fn = (safe_exp_std if c.std_fn == "safe_exp" else softplus_std)(c.std_for_zero_param, c.min_std)
        self.distribution = get_distribution(action_spec, c.continuous_distribution, std_fn)
        self.continuous = action_spec.num_values <= 0
        self.policy_loss = _policy_loss(c)
        coefficients: dict = {}
        if c.entropy_cost:
            coefficients["entropy"] = c.entropy_cost
        if c.policy_loss == "vmpo":
            coefficients["kl_mu_pi"] = policy_losses.LagrangeCoefficient(threshold=c.vmpo_e_alpha,
                                                                         name="vmpo_alpha")
        self.regularizer = policy_losses.KLRegularizer(**coefficients)
        self.coefficient_modules = [m for m in [self.policy_loss.temperature, *self.regularizer.coefficients.values()]
                                    if isinstance(m, policy_losses.LagrangeCoefficient)]
        self.reward_normalizer = AverageMeanStd(1) if c.reward_normalizer == "popart" else None
        self.observation_normalizer = None
        if c.normalize_observations:
            if not isinstance(observation_spec, ArraySpec) or len(observation_spec.shape) != 1:
                raise ValueError(f"normalize_observations takes one vector observation (shape (D,)); this env's "
                                 f"is {observation_spec}: pass --normalize_observations=false")
            self.observation_normalizer = AverageMeanStd(int(observation_spec.shape[0]))
        self.network = self._build_network()
        self.schedule = UpdateSchedule(epochs=c.epochs, minibatches=c.minibatches, shuffle=c.batch_mode != "repeat",
                                       split=_SPLITS.get(c.batch_mode, "none"))
        # The split batch modes train single transitions (prepare_transitions, transition_loss): a feed-forward
        # network only, since a transition carries no recurrent state.
        self.trains_transitions = not c.lstm_size
        self.act(tf.zeros([1, *action_spec.shape], tf.as_dtype(action_spec.dtype)),
                 zeros_env_output(observation_spec, 1), self.initial_state(1))
        if c.initializer == "orthogonal":  # the variables exist now (control_mlp refuses it in the config)
            orthogonal_init(self.network, seed=None)

    def _build_network(self):
        c = self.config
        param_size = self.distribution.param_size()
        if c.network == "control_mlp":
            if not isinstance(self.observation_spec, ArraySpec) or len(self.observation_spec.shape) != 1:
                raise ValueError(f"network=control_mlp takes one vector observation (shape (D,)); this env's is "
                                 f"{self.observation_spec}: use network=impala_shallow, impala_deep or small_conv "
                                 "for images, multi_input for a dict")
            return ContinuousControlNetwork(
                param_size, c.mlp_sizes, c.activation, std_independent_of_input=c.std_independent_of_input,
                layer_norm=c.layer_norm, observation_normalizer=self.observation_normalizer,
                input_clipping=c.observation_clipping if self.observation_normalizer is not None else None)
        if self.observation_normalizer is not None:
            raise ValueError(f"normalize_observations needs network=control_mlp (this run's is {c.network}): pass "
                             "--normalize_observations=false")
        if c.std_independent_of_input:
            raise ValueError(f"std_independent_of_input needs network=control_mlp (this run's is {c.network}): pass "
                             "--std_independent_of_input=false")
        categorical = isinstance(self.distribution, Categorical)
        if c.use_reward_and_action and not categorical:
            raise ValueError("use_reward_and_action feeds a one-hot previous action: it needs one discrete action")
        num_actions = self.action_spec.num_values if categorical else 1  # the one-hot's size (unused otherwise)
        return build_actor_critic(c.network, num_actions, param_size, c.mlp_sizes,
                                  c.separate_value_network and not c.lstm_size, c.lstm_size,
                                  c.use_reward_and_action, observation_spec=self.observation_spec)

    # -- Agent protocol --------------------------------------------------------------------------------------
    def initial_state(self, batch_size):
        return self.network.initial_state(batch_size)

    def act(self, prev_actions, env_outputs: EnvOutput, agent_state, env_ids=None):
        """One step for a batch of envs ``[B]``; ``env_ids`` is unused (the policy is the same for every env)."""
        del env_ids
        outputs, new_state = self.network(prev_actions, env_outputs, agent_state, unroll=False)
        action = tf.cast(self.distribution.sample(outputs.policy_logits), tf.as_dtype(self.action_spec.dtype))
        return AgentOutput(action, outputs.policy_logits, outputs.baseline), new_state

    def loss(self, unroll, weights=None) -> LossResult:
        del weights  # on-policy queue: every unroll counts once
        return loss_lib.compute_loss(self.config, self.network, self.distribution, self.policy_loss,
                                     self.regularizer, unroll, self.reward_normalizer, self.observation_normalizer)

    # -- TransitionAgent (batch modes split and split_with_advantage_recomputation) ----------------------------
    def prepare_transitions(self, unroll):
        return loss_lib.prepare_transitions(self.config, self.network, self.distribution, unroll,
                                            self.reward_normalizer)

    def transition_loss(self, transitions) -> LossResult:
        return loss_lib.transition_loss(self.config, self.network, self.distribution, self.policy_loss,
                                        self.regularizer, transitions, self.reward_normalizer,
                                        self.observation_normalizer)

    def update_targets(self, update):
        del update  # no target network
        return tf.constant(False)

    def greedy_action(self, agent_outputs) -> tf.Tensor:
        return tf.cast(self.distribution.mode(agent_outputs.policy_logits), tf.as_dtype(self.action_spec.dtype))

    @property
    def trainable_variables(self):
        return list(self.network.trainable_variables) + [m.param for m in self.coefficient_modules]

    @property
    def policy_variables(self):
        return checkpoint_variables(self.network) + self._normalizer_variables(self.observation_normalizer)

    @staticmethod
    def _normalizer_variables(normalizer) -> list:
        return [] if normalizer is None else list(normalizer.variables)

    def checkpoint_items(self) -> dict:
        items: dict = {"network": checkpoint_variables(self.network)}
        if self.coefficient_modules:
            items["coefficients"] = [m.param for m in self.coefficient_modules]
        normalizers = (self._normalizer_variables(self.observation_normalizer)
                       + self._normalizer_variables(self.reward_normalizer))
        if normalizers:
            items["normalizers"] = normalizers
        return items

    def make_optimizer(self, total_updates: int):
        return make_optimizer(self.config.optimizer, total_updates)

    def agent_output_spec(self, batch_size=None):
        return AgentOutput(
            action=tf.TensorSpec([batch_size, *self.action_spec.shape], tf.as_dtype(self.action_spec.dtype)),
            policy_logits=tf.TensorSpec([batch_size, self.distribution.param_size()], tf.float32),
            baseline=tf.TensorSpec([batch_size], tf.float32))


if TYPE_CHECKING:  # mypy checks that the class follows the Agent protocol the learner relies on

    def _follows_the_agent_protocol(agent: OnPolicyAgent) -> Agent:
        return agent

    def _trains_transitions(agent: OnPolicyAgent) -> TransitionAgent:
        return agent
