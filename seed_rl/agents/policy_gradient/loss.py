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

Truncated episodes bootstrap (the actor's two-message protocol: see agents/vtrace/loss.py; the estimators give
the fake transition a zero advantage and no propagation).
"""

from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from seed_rl.agents.policy_gradient.config import OnPolicyConfig
from seed_rl.ops import advantages as advantages_lib
from seed_rl.ops import policy_losses
from seed_rl.types import LossResult


def compute_loss(config: OnPolicyConfig, network, distribution, policy_loss: policy_losses.PolicyLoss,
                 regularizer: policy_losses.KLRegularizer, unroll, reward_normalizer: Optional[Any] = None,
                 observation_normalizer: Optional[Any] = None) -> LossResult:
    c = config
    outputs, _ = network(unroll.prev_actions, unroll.env_outputs, unroll.agent_state, unroll=True)
    predictions = outputs.baseline  # normalised values under PopArt
    if reward_normalizer is not None:
        values = reward_normalizer.unnormalize(predictions[..., None])[..., 0]
    else:
        values = predictions
    behaviour = tf.nest.map_structure(lambda t: t[:-1], unroll.agent_outputs)
    params = outputs.policy_logits[:-1]
    env_next = tf.nest.map_structure(lambda t: t[1:], unroll.env_outputs)
    rewards = tf.cast(env_next.reward, tf.float32)
    if c.max_abs_reward:
        rewards = tf.clip_by_value(rewards, -c.max_abs_reward, c.max_abs_reward)
    done = tf.cast(env_next.done, tf.bool)
    abandoned = done & tf.cast(env_next.abandoned, tf.bool)
    terminated = done & ~abandoned
    log_pi = distribution.log_prob(params, behaviour.action)
    log_mu = distribution.log_prob(behaviour.policy_logits, behaviour.action)
    values_sg = tf.stop_gradient(values)
    if c.advantage_estimator == "gae":
        targets, advantages = advantages_lib.gae(values_sg, rewards, terminated, abandoned, c.discounting, c.lambda_)
    elif c.advantage_estimator == "vtrace":
        targets, advantages = advantages_lib.vtrace_advantages(
            values_sg, rewards, terminated, abandoned, c.discounting, tf.stop_gradient(log_pi), log_mu, c.lambda_,
            c.max_importance_weight)
    else:
        targets, advantages = advantages_lib.nstep(values_sg, rewards, terminated, abandoned, c.discounting,
                                                   c.nstep_n)
    value_targets, old_predictions = targets, behaviour.baseline
    metrics = {}
    if reward_normalizer is not None:
        value_targets = reward_normalizer.normalize(targets[..., None])[..., 0]
        mean, std = reward_normalizer.mean_std()
        advantages = advantages / std[0]
        metrics.update({"popart/mean": mean[0], "popart/std": std[0]})
    pl, policy_metrics = policy_loss(advantages, log_pi, log_mu)
    if c.flip_policy_gradient:
        pl = -pl
    metrics.update(policy_metrics)
    value_loss = policy_losses.value_loss(value_targets, predictions[:-1], old_predictions,
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
        "value/mean_target": tf.reduce_mean(targets),
    })
    if reward_normalizer is not None:
        reward_normalizer.update(targets[..., None])
    if observation_normalizer is not None:
        observation_normalizer.update(tf.cast(unroll.env_outputs.observation[:-1], tf.float32))
    return LossResult(total, metrics)
