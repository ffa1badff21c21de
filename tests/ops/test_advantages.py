"""seed_rl/ops/advantages.py against slow numpy written from the definitions, and its limiting cases."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops import advantages as adv
from seed_rl.ops.vtrace import from_importance_weights

T, B, GAMMA = 7, 4, 0.9


def _batch(seed=0, dones=True):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(T + 1, B)).astype(np.float32)
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    terminated = (rng.random((T, B)) < 0.15) if dones else np.zeros((T, B), bool)
    abandoned = (rng.random((T, B)) < 0.1) & ~terminated if dones else np.zeros((T, B), bool)
    return values, rewards, terminated, abandoned


def _np_gae(values, rewards, terminated, abandoned, gamma, lam):
    """A_t = sum_l (gamma lam)^l delta_{t+l}, summed forward until the episode ends (paper notation)."""
    out = np.zeros_like(rewards)
    for b in range(rewards.shape[1]):
        for t in range(rewards.shape[0]):
            total, weight = 0.0, 1.0
            for k in range(t, rewards.shape[0]):
                if abandoned[k, b]:
                    break
                delta = rewards[k, b] + gamma * (0.0 if terminated[k, b] else values[k + 1, b]) - values[k, b]
                total += weight * delta
                if terminated[k, b]:
                    break
                weight *= gamma * lam
            out[t, b] = total
    return out


def _np_nstep(values, rewards, terminated, abandoned, gamma, n):
    out = np.zeros_like(rewards)
    length = rewards.shape[0]
    for b in range(rewards.shape[1]):
        for t in range(length):
            if abandoned[t, b]:
                out[t, b] = values[t, b]
                continue
            g, weight, k = 0.0, 1.0, t
            while True:
                g += weight * rewards[k, b]
                weight *= gamma
                if terminated[k, b]:
                    break
                k += 1
                if k == min(t + n, length):
                    g += weight * values[k, b]
                    break
                if abandoned[k, b]:
                    g += weight * values[k, b]
                    break
            out[t, b] = g
    return out


ESTIMATORS = [("gae", lam, adv.gae, _np_gae) for lam in (0.0, 0.5, 0.95, 1.0)] + [
    ("nstep", n, adv.nstep, _np_nstep) for n in (1, 3, 7, 20)]


@pytest.mark.parametrize("name,param,estimator,reference", ESTIMATORS, ids=[f"{e[0]}-{e[1]}" for e in ESTIMATORS])
def test_estimators_match_their_definitions(name, param, estimator, reference):
    values, rewards, terminated, abandoned = _batch(1 if name == "gae" else 8)
    targets, advantages = estimator(values, rewards, terminated, abandoned, GAMMA, param)
    expected_targets = reference(values, rewards, terminated, abandoned, GAMMA, param)
    if name == "gae":  # the reference gives advantages; nstep's gives returns (targets)
        expected_targets = values[:-1] + expected_targets
    np.testing.assert_allclose(targets.numpy(), expected_targets, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(advantages.numpy(), expected_targets - values[:-1], rtol=1e-5, atol=1e-5)
    if name == "gae":
        assert np.all(advantages.numpy()[abandoned] == 0)


def test_gae_with_lambda_one_is_discounted_returns_minus_values():
    values, rewards, terminated, abandoned = _batch(2, dones=False)
    _, advantages = adv.gae(values, rewards, terminated, abandoned, GAMMA, 1.0)
    returns = np.zeros_like(rewards)
    running = values[-1]
    for t in reversed(range(T)):
        running = rewards[t] + GAMMA * running
        returns[t] = running
    np.testing.assert_allclose(advantages.numpy(), returns - values[:-1], rtol=1e-5, atol=1e-5)


def test_vtrace_advantages_on_policy_equal_gae_and_targets_equal_impala_vtrace():
    values, rewards, terminated, abandoned = _batch(3)
    logp = np.random.default_rng(4).normal(size=(T, B)).astype(np.float32)
    vt = adv.vtrace_advantages(values, rewards, terminated, abandoned, GAMMA, logp, logp, lambda_=0.9)
    g = adv.gae(values, rewards, terminated, abandoned, GAMMA, 0.9)
    for a, b in zip(vt, g):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    # Off-policy, no episode ends: the targets are IMPALA's v-trace targets with rho-bar = c-bar = 1.
    values, rewards, terminated, abandoned = _batch(5, dones=False)
    rng = np.random.default_rng(6)
    target, behaviour = rng.normal(size=(T, B)).astype(np.float32), rng.normal(size=(T, B)).astype(np.float32)
    targets, _ = adv.vtrace_advantages(values, rewards, terminated, abandoned, GAMMA, target, behaviour,
                                       lambda_=0.8)
    impala = from_importance_weights(log_rhos=target - behaviour, discounts=np.full((T, B), GAMMA, np.float32),
                                     rewards=rewards, values=values[:-1], bootstrap_value=values[-1],
                                     clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, lambda_=0.8)
    np.testing.assert_allclose(targets.numpy(), impala.vs.numpy(), rtol=1e-5, atol=1e-5)


def test_vtrace_clips_importance_weights_and_stops_gradients():
    values, rewards, terminated, abandoned = _batch(7, dones=False)
    big = np.full((T, B), 5.0, np.float32)  # log pi/mu = 5: clipped to max_importance_weight
    clipped = adv.vtrace_advantages(values, rewards, terminated, abandoned, GAMMA, big, np.zeros_like(big))
    on_policy = adv.gae(values, rewards, terminated, abandoned, GAMMA)
    np.testing.assert_allclose(clipped[0].numpy(), on_policy[0].numpy(), rtol=1e-5, atol=1e-5)
    v = tf.Variable(values)
    with tf.GradientTape() as tape:
        targets, advantages = adv.gae(v, rewards, terminated, abandoned, GAMMA)
        total = tf.reduce_sum(targets) + tf.reduce_sum(advantages)
    assert tape.gradient(total, v) is None


def test_nstep_limits():
    values, rewards, terminated, abandoned = _batch(9, dones=False)
    one, _ = adv.nstep(values, rewards, terminated, abandoned, GAMMA, 1)
    np.testing.assert_allclose(one.numpy(), rewards + GAMMA * values[1:], rtol=1e-5)
    # n >= T: the full discounted return bootstrapped from V_T, GAE with lambda 1.
    full, _ = adv.nstep(values, rewards, terminated, abandoned, GAMMA, 50)
    gae_targets, _ = adv.gae(values, rewards, terminated, abandoned, GAMMA, 1.0)
    np.testing.assert_allclose(full.numpy(), gae_targets.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="n must be >= 1"):
        adv.nstep(values, rewards, terminated, abandoned, GAMMA, 0)
