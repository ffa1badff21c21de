"""The PPO loss: the network re-run over a time-major unroll batch, GAE advantages from its values, the clipped
surrogate, the value loss and the entropy bonus, assembled from ``seed_rl/ops`` (advantages, policy_losses)."""

from __future__ import annotations

import tensorflow as tf

from seed_rl.agents.ppo.config import PPOConfig
from seed_rl.ops import advantages as advantages_lib
from seed_rl.ops import policy_losses
from seed_rl.ops.distributions import Categorical
from seed_rl.types import LossResult


def compute_loss(config: PPOConfig, network, distribution: Categorical, unroll) -> LossResult:
    """The PPO loss of a time-major unroll batch ``[T + 1, B]``: the network is re-run over it, GAE advantages and
    value targets come from its values (gradients stopped), then the clipped surrogate, the value loss and the
    entropy bonus. Truncated episodes bootstrap (the actor's two-message protocol: see agents/vtrace/loss.py)."""
    c = config
    outputs, _ = network(unroll.prev_actions, unroll.env_outputs, unroll.agent_state, unroll=True)
    values = outputs.baseline
    behaviour = tf.nest.map_structure(lambda t: t[:-1], unroll.agent_outputs)
    logits = outputs.policy_logits[:-1]
    env_next = tf.nest.map_structure(lambda t: t[1:], unroll.env_outputs)
    rewards = tf.cast(env_next.reward, tf.float32)
    if c.max_abs_reward:
        rewards = tf.clip_by_value(rewards, -c.max_abs_reward, c.max_abs_reward)
    done = tf.cast(env_next.done, tf.bool)
    abandoned = done & tf.cast(env_next.abandoned, tf.bool)
    targets, advantages = advantages_lib.gae(tf.stop_gradient(values), rewards, done & ~abandoned, abandoned,
                                             c.discounting, c.lambda_)
    log_pi = distribution.log_prob(logits, behaviour.action)
    log_mu = distribution.log_prob(behaviour.policy_logits, behaviour.action)
    surrogate = policy_losses.ppo(c.epsilon, normalize_advantages=c.normalize_advantages)
    policy_loss, metrics = surrogate(advantages, log_pi, log_mu)
    if c.flip_policy_gradient:
        policy_loss = -policy_loss
    value_loss = policy_losses.value_loss(targets, values[:-1], behaviour.baseline,
                                          huber_delta=c.huber_delta or None, clip_eps=c.value_clip_eps or None)
    regularizer = policy_losses.KLRegularizer(entropy=c.entropy_cost)
    per_step, adjustment, regularizer_metrics = regularizer(distribution, logits, behaviour.policy_logits)
    entropy_loss = tf.reduce_mean(per_step) + adjustment
    total = policy_loss + c.baseline_cost * value_loss + entropy_loss
    metrics.update(regularizer_metrics)
    metrics.update({
        "losses/policy": policy_loss,
        "losses/value": value_loss,
        "losses/entropy": entropy_loss,
        "losses/total": total,
        "policy/kl_behaviour_target": tf.reduce_mean(log_mu - log_pi),
        "value/mean": tf.reduce_mean(values),
        "value/mean_target": tf.reduce_mean(targets),
    })
    return LossResult(total, metrics)
