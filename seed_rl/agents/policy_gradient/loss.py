"""The on-policy family's loss (the original's ``GeneralizedOnPolicyLoss``): the network re-run over a time-major
unroll batch, advantages and value targets from its values (gradients stopped) by the configured estimator, the
configured policy loss, the value loss and the KL/entropy regulariser, all from ``seed_rl/ops``.

With PopArt (``reward_normalizer=popart``, without compensation as the original's MuJoCo config) the value head
predicts normalised values: the estimator bootstraps from the unnormalised ones, the value loss compares the
prediction with the normalised targets, the advantages are divided by the std, and then the statistics take the
batch's targets. With ``normalize_observations`` the observation statistics take the batch's observations (all but
the last step) after the network ran on them with the statistics so far: the original updates them first, a
difference of one minibatch, so that the loss of a batch is a function of the weights and the statistics at the
start of its update (docs/deviations.md).

``compute_loss`` is the loss of whole unrolls (batch modes shuffle and repeat: the advantages come from the
weights of the update); ``prepare_transitions`` and ``transition_loss`` split it for the split modes (the
original's ``compute_advantages_and_split``: the advantages, value targets and PopArt's statistics once over the
whole batch, then minibatches of single transitions).

Truncated episodes bootstrap (the actor's two-message protocol: see agents/vtrace/loss.py; the estimators give
the fake transition a zero advantage and no propagation).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import tensorflow as tf

from seed_rl.agents.policy_gradient.config import OnPolicyConfig
from seed_rl.ops import advantages as advantages_lib
from seed_rl.ops import policy_losses
from seed_rl.types import LossResult


class _Estimate(NamedTuple):
    targets: Any
    """[T, B] value targets (unnormalised)."""
    value_targets: Any
    """[T, B] what the value head is trained towards (normalised under PopArt)."""
    advantages: Any
    """[T, B] (divided by PopArt's std)."""
    metrics: dict


def _network_outputs(network, reward_normalizer, prev_actions, env_outputs, agent_state):
    """(policy parameters, value-head predictions, values) of a time-major batch; predictions are normalised
    under PopArt, values never."""
    outputs, _ = network(prev_actions, env_outputs, agent_state, unroll=True)
    predictions = outputs.baseline
    if reward_normalizer is not None:
        values = reward_normalizer.unnormalize(predictions[..., None])[..., 0]
    else:
        values = predictions
    return outputs.policy_logits, predictions, values


def _acting_values(unroll, reward_normalizer):
    """[T + 1, B] the value head's outputs stored when each step was acted (``advantage_values=acting``),
    unnormalised under PopArt by its statistics so far."""
    baseline = tf.cast(unroll.agent_outputs.baseline, tf.float32)
    if reward_normalizer is not None:
        baseline = reward_normalizer.unnormalize(baseline[..., None])[..., 0]
    return baseline


def _estimate(c: OnPolicyConfig, distribution, unroll, params, values, reward_normalizer) -> _Estimate:
    """Targets and advantages of the unroll's first T steps by the configured estimator, from the values of all
    T + 1 steps (gradients stopped; with ``advantage_values=acting`` the values stored at acting time, not
    ``values``); normalised by PopArt's statistics so far (which then take the targets). ``params`` (the policy of
    the update) is used by the vtrace estimator only."""
    if c.advantage_values == "acting":
        values = _acting_values(unroll, reward_normalizer)
    behaviour = tf.nest.map_structure(lambda t: t[:-1], unroll.agent_outputs)
    env_next = tf.nest.map_structure(lambda t: t[1:], unroll.env_outputs)
    rewards = tf.cast(env_next.reward, tf.float32)
    if c.max_abs_reward:
        rewards = tf.clip_by_value(rewards, -c.max_abs_reward, c.max_abs_reward)
    done = tf.cast(env_next.done, tf.bool)
    abandoned = done & tf.cast(env_next.abandoned, tf.bool)
    terminated = done & ~abandoned
    values_sg = tf.stop_gradient(values)
    if c.advantage_estimator == "gae":
        targets, advantages = advantages_lib.gae(values_sg, rewards, terminated, abandoned, c.discounting, c.lambda_)
    elif c.advantage_estimator == "vtrace":
        log_pi = tf.stop_gradient(distribution.log_prob(params[:-1], behaviour.action))
        log_mu = distribution.log_prob(behaviour.policy_logits, behaviour.action)
        targets, advantages = advantages_lib.vtrace_advantages(
            values_sg, rewards, terminated, abandoned, c.discounting, log_pi, log_mu, c.lambda_,
            c.max_importance_weight)
    else:
        targets, advantages = advantages_lib.nstep(values_sg, rewards, terminated, abandoned, c.discounting,
                                                   c.nstep_n)
    value_targets = targets
    metrics = {}
    if reward_normalizer is not None:
        value_targets = reward_normalizer.normalize(targets[..., None])[..., 0]
        mean, std = reward_normalizer.mean_std()
        advantages = advantages / std[0]
        metrics.update({"popart/mean": mean[0], "popart/std": std[0]})
        reward_normalizer.update(targets[..., None])
    return _Estimate(targets, value_targets, advantages, metrics)


def _loss_terms(c: OnPolicyConfig, distribution, policy_loss: policy_losses.PolicyLoss,
                regularizer: policy_losses.KLRegularizer, params, predictions, values, behaviour,
                estimate: _Estimate, proximal_params=None) -> LossResult:
    """The policy, value and regularisation losses of steps with given advantages and targets (all [T, B]);
    ``proximal_params``, the policy PPO's ratio is clipped against (``proximal_policy=learner``), or None."""
    log_pi = distribution.log_prob(params, behaviour.action)
    log_mu = distribution.log_prob(behaviour.policy_logits, behaviour.action)
    metrics = dict(estimate.metrics)
    log_prox = None if proximal_params is None else distribution.log_prob(proximal_params, behaviour.action)
    pl, policy_metrics = policy_loss(estimate.advantages, log_pi, log_mu, log_prox)
    if c.flip_policy_gradient:
        pl = -pl
    metrics.update(policy_metrics)
    value_loss = policy_losses.value_loss(estimate.value_targets, predictions, behaviour.baseline,
                                          huber_delta=c.huber_delta or None, clip_eps=c.value_clip_eps or None)
    per_step, adjustment, regularizer_metrics = regularizer(distribution, params, behaviour.policy_logits)
    regularization_loss = tf.reduce_mean(per_step) + adjustment
    total = pl + c.baseline_cost * value_loss + regularization_loss
    metrics.update(regularizer_metrics)
    metrics.update({
        "losses/policy": pl,
        "losses/value": value_loss,
        "losses/regularization": regularization_loss,
        "losses/total": total,
        "policy/kl_behaviour_target": tf.reduce_mean(log_mu - log_pi),
        "value/mean": tf.reduce_mean(values),
        "value/mean_target": tf.reduce_mean(estimate.targets),
    })
    return LossResult(total, metrics)


def compute_loss(config: OnPolicyConfig, network, distribution, policy_loss: policy_losses.PolicyLoss,
                 regularizer: policy_losses.KLRegularizer, unroll, reward_normalizer: Optional[Any] = None,
                 observation_normalizer: Optional[Any] = None) -> LossResult:
    """The loss of a time-major batch of unrolls [T + 1, B]; advantages from this update's weights."""
    params, predictions, values = _network_outputs(network, reward_normalizer, unroll.prev_actions,
                                                   unroll.env_outputs, unroll.agent_state)
    estimate = _estimate(config, distribution, unroll, params, values, reward_normalizer)
    behaviour = tf.nest.map_structure(lambda t: t[:-1], unroll.agent_outputs)
    result = _loss_terms(config, distribution, policy_loss, regularizer, params[:-1], predictions[:-1],
                         values[:-1], behaviour, estimate)
    if observation_normalizer is not None:
        observation_normalizer.update(tf.cast(unroll.env_outputs.observation[:-1], tf.float32))
    return result


def prepare_transitions(config: OnPolicyConfig, network, distribution, unroll,
                        reward_normalizer: Optional[Any] = None) -> dict:
    """The split modes' pass over a whole batch [T + 1, B] (feed-forward networks): advantages and targets from
    the current weights, or from the values stored at acting time without running the network
    (``advantage_values=acting``; PopArt's statistics take the targets), and each of the first T steps' inputs, as a dict
    of [T, B, ...] tensors; with ``proximal_policy=learner`` also this pass's policy (``proximal_params``), which
    PPO's ratio is then clipped against. Observation statistics are not updated here (each minibatch's loss does,
    as in the unroll modes, so a transition counts once per epoch in every mode)."""
    params = values = None  # advantage_values=acting: the stored values, no pass of the network for them
    if config.advantage_values != "acting" or config.proximal_policy == "learner":
        params, _, values = _network_outputs(network, reward_normalizer, unroll.prev_actions, unroll.env_outputs,
                                             unroll.agent_state)
    estimate = _estimate(config, distribution, unroll, params, values, reward_normalizer)
    first = tf.nest.map_structure(lambda t: t[:-1], (unroll.prev_actions, unroll.env_outputs,
                                                     unroll.agent_outputs))
    prev_actions, env_outputs, behaviour = first
    prepared = dict(prev_actions=prev_actions, env_outputs=env_outputs, agent_outputs=behaviour,
                    targets=tf.stop_gradient(estimate.targets), value_targets=tf.stop_gradient(estimate.value_targets),
                    advantages=tf.stop_gradient(estimate.advantages))
    if params is not None and config.proximal_policy == "learner":
        prepared["proximal_params"] = tf.stop_gradient(tf.cast(params[:-1], tf.float32))
    return prepared


def transition_loss(config: OnPolicyConfig, network, distribution, policy_loss: policy_losses.PolicyLoss,
                    regularizer: policy_losses.KLRegularizer, transitions: dict,
                    reward_normalizer: Optional[Any] = None, observation_normalizer: Optional[Any] = None,
                    ) -> LossResult:
    """The loss of a minibatch of single transitions (``prepare_transitions``' entries, rows [N]): the network
    runs on them as a batch of N one-step unrolls."""
    step = tf.nest.map_structure(lambda t: t[None], (transitions["prev_actions"], transitions["env_outputs"]))
    size = tf.shape(transitions["advantages"])[0]
    params, predictions, values = _network_outputs(network, reward_normalizer, step[0], step[1],
                                                   network.initial_state(size))
    behaviour = tf.nest.map_structure(lambda t: t[None], transitions["agent_outputs"])
    metrics = {}
    if reward_normalizer is not None:
        mean, std = reward_normalizer.mean_std()
        metrics.update({"popart/mean": mean[0], "popart/std": std[0]})
    estimate = _Estimate(targets=transitions["targets"][None], value_targets=transitions["value_targets"][None],
                         advantages=transitions["advantages"][None], metrics=metrics)
    proximal = transitions.get("proximal_params")
    result = _loss_terms(config, distribution, policy_loss, regularizer, params, predictions, values, behaviour,
                         estimate, None if proximal is None else proximal[None])
    if observation_normalizer is not None:
        observation_normalizer.update(tf.cast(transitions["env_outputs"].observation, tf.float32))
    return result
