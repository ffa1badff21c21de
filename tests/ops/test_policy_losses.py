"""seed_rl/ops/policy_losses.py against numpy and the textbook forms of each loss."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops import policy_losses as pl

T, B = 6, 5


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    advantages = rng.normal(size=(T, B)).astype(np.float32)
    log_pi = tf.Variable(rng.normal(size=(T, B)).astype(np.float32) * 0.3 - 1.0)
    log_mu = (log_pi.numpy() + rng.normal(size=(T, B)).astype(np.float32) * 0.4)
    return advantages, log_pi, log_mu


def _loss_and_grad(loss_fn, advantages, log_pi, log_mu):
    with tf.GradientTape() as tape:
        loss, metrics = loss_fn(advantages, log_pi, log_mu)
    return float(loss), tape.gradient(loss, log_pi).numpy(), metrics


def test_pg_is_minus_log_pi_times_the_advantage():
    a, log_pi, log_mu = _inputs(1)
    loss, grad, _ = _loss_and_grad(pl.pg(), a, log_pi, log_mu)
    np.testing.assert_allclose(loss, -np.mean(log_pi.numpy() * a), rtol=1e-5)
    np.testing.assert_allclose(grad, -a / a.size, rtol=1e-5)


def test_vtrace_loss_truncates_the_importance_weights():
    a, log_pi, log_mu = _inputs(2)
    loss, _, _ = _loss_and_grad(pl.vtrace(1.0), a, log_pi, log_mu)
    rho = np.minimum(np.exp(log_pi.numpy() - log_mu), 1.0)
    np.testing.assert_allclose(loss, -np.mean(rho * log_pi.numpy() * a), rtol=1e-5)


def test_ppo_has_the_clipped_surrogates_gradient_and_with_infinite_epsilon_is_importance_weighted_pg():
    a, log_pi, log_mu = _inputs(3)
    eps = 0.2
    _, grad, metrics = _loss_and_grad(pl.ppo(eps), a, log_pi, log_mu)
    assert 0 < float(metrics["policy/ppo_clipped_fraction"]) < 1  # the test data clips some steps, not all
    # The textbook surrogate with the original's ratio bounds [1 / (1 + eps), 1 + eps].
    with tf.GradientTape() as tape:
        ratio = tf.exp(log_pi - log_mu)
        surrogate = tf.minimum(ratio * a, tf.clip_by_value(ratio, 1 / (1 + eps), 1 + eps) * a)
        textbook = -tf.reduce_mean(surrogate)
    np.testing.assert_allclose(grad, tape.gradient(textbook, log_pi).numpy(), rtol=1e-4, atol=1e-7)
    # epsilon = inf: nothing is clipped; the importance-weighted policy gradient.
    loss_inf, grad_inf, _ = _loss_and_grad(pl.ppo(math.inf), a, log_pi, log_mu)
    loss_iw, grad_iw, _ = _loss_and_grad(pl.PolicyLoss(use_importance_weights=True), a, log_pi, log_mu)
    np.testing.assert_allclose(loss_inf, loss_iw, rtol=1e-6)
    np.testing.assert_allclose(grad_inf, grad_iw, rtol=1e-6)


def test_decoupled_ppo_clips_against_the_proximal_policy_and_weights_by_it_over_the_acting_one():
    """``log_prox`` (decoupled PPO): the ratio clipped is pi / prox, the step weighted by min(prox / mu, c); with
    prox = mu it is PPO's clipped surrogate itself."""
    a, log_pi, log_mu = _inputs(3)
    eps, cap = 0.2, 1.0
    plain = _loss_and_grad(pl.ppo(eps), a, log_pi, log_mu)
    with tf.GradientTape() as tape:
        same, metrics = pl.ppo(eps, max_proximal_weight=100.0)(a, log_pi, log_mu, log_mu)
    np.testing.assert_allclose(float(same), plain[0], rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(same, log_pi).numpy(), plain[1], rtol=1e-6)
    np.testing.assert_allclose(float(metrics["policy/ppo_clipped_fraction"]),
                               float(plain[2]["policy/ppo_clipped_fraction"]))
    # A proximal policy between the acting one and the policy of the update: the textbook decoupled surrogate.
    log_prox = (log_pi.numpy() + log_mu) / 2
    with tf.GradientTape() as tape:
        decoupled, metrics = pl.ppo(eps, max_proximal_weight=cap)(a, log_pi, log_mu, log_prox)
    grad = tape.gradient(decoupled, log_pi).numpy()
    with tf.GradientTape() as tape:
        ratio = tf.exp(log_pi - log_prox)
        weight = np.minimum(np.exp(log_prox - log_mu), cap)
        surrogate = weight * tf.minimum(ratio * a, tf.clip_by_value(ratio, 1 / (1 + eps), 1 + eps) * a)
        textbook = -tf.reduce_mean(surrogate)
    np.testing.assert_allclose(grad, tape.gradient(textbook, log_pi).numpy(), rtol=1e-4, atol=1e-7)
    # Fewer steps are clipped than against the acting policy (half the distance), and the weight is truncated.
    assert float(metrics["policy/ppo_clipped_fraction"]) < float(plain[2]["policy/ppo_clipped_fraction"])
    assert float(metrics["policy/mean_log_proximal_weight"]) <= 0.0 + 1e-7
    # The proximal policy is PPO's: a loss that clips nothing refuses it.
    with pytest.raises(ValueError, match="proximal"):
        pl.vtrace(1.0)(a, log_pi, log_mu, log_prox)


def test_ppo_normalizes_advantages_when_asked():
    a, log_pi, log_mu = _inputs(4)
    weighted, _ = pl.AdvantagePreprocessor(normalize=True)(a * 10 + 3)
    np.testing.assert_allclose(weighted.numpy(), (a - a.mean()) / a.std(), rtol=1e-4, atol=1e-5)


def test_awr_weights_are_exp_advantage_over_beta_capped_at_w_max():
    a, log_pi, log_mu = _inputs(5)
    beta, w_max = 0.5, 3.0
    loss, _, _ = _loss_and_grad(pl.awr(beta, w_max), a, log_pi, log_mu)
    weights = np.minimum(np.exp(a / beta), w_max)
    np.testing.assert_allclose(loss, -np.mean(log_pi.numpy() * weights), rtol=1e-5)


def test_vmpo_weights_the_top_half_by_a_softmax_and_adjusts_its_temperature():
    a, log_pi, log_mu = _inputs(6)
    temperature = pl.LagrangeCoefficient(threshold=0.1, init_alpha=2.0, adjustment_speed=10.0)
    loss_fn = pl.vmpo(0.1, temperature)
    with tf.GradientTape(persistent=True) as tape:
        loss, metrics = loss_fn(a, log_pi, log_mu)
    grad = tape.gradient(loss, log_pi).numpy()
    flat = a.ravel()
    top = a >= np.sort(flat)[::-1][flat.size // 2 - 1]
    assert top.sum() == flat.size // 2
    eta = 2.0
    weights = np.where(top, np.exp(a / eta), 0.0)
    weights /= weights.sum()  # a softmax over the top half only
    np.testing.assert_allclose(grad, -weights, rtol=1e-4, atol=1e-8)  # the paper's sum, not a mean
    kl = np.log(np.mean(np.exp(a[top] / eta)))
    np.testing.assert_allclose(float(metrics["policy/transformation_kl"]), kl, rtol=1e-5)
    # d loss / d param = d alpha / d param * (threshold - kl), alpha = exp(10 param).
    np.testing.assert_allclose(float(tape.gradient(loss, temperature.param)), 10 * eta * (0.1 - kl), rtol=1e-4)


def test_lagrange_coefficient_enforces_its_inequality():
    """Minimise (x - 5)^2 subject to x <= 2. Gradient descent on x and ascent on alpha circle the solution (x = 2,
    alpha = 6) rather than settle on it, so the check is on x's average over time, far below the unconstrained 5.
    (The original's docstring example, -x^2, has no minimum on x <= 2: x runs off to minus infinity.)"""
    multiplier = pl.LagrangeCoefficient(threshold=2.0)
    x = tf.Variable(1.23)
    optimizer = keras.optimizers.Adam(0.01)

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            loss = tf.square(x - 5.0) + multiplier.scale_loss(x) + multiplier.adjustment_loss(x)
        variables = [x, multiplier.param]
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return x.read_value()

    trajectory = np.array([float(step()) for _ in range(6000)])[2000:]
    assert abs(trajectory.mean() - 2.0) < 0.35, trajectory.mean()
    assert trajectory.max() < 3.5
    fixed = pl.FixedCoefficient(0.5)
    assert float(fixed()) == 0.5 and float(fixed.adjustment_loss(3.0)) == 0.0


def test_lagrange_coefficient_stays_in_its_range():
    multiplier = pl.LagrangeCoefficient(threshold=0.0, alpha_range=(0.1, 10.0))
    multiplier.param.assign(100.0)
    multiplier.param.assign(multiplier.param.constraint(multiplier.param))
    np.testing.assert_allclose(float(multiplier()), 10.0, rtol=1e-5)
    with pytest.raises(ValueError, match="alpha_range"):
        pl.LagrangeCoefficient(threshold=0.0, init_alpha=100.0, alpha_range=(0.1, 10.0))
    with pytest.raises(ValueError, match="transformation"):
        pl.PolicyLoss(transformation="sigmoid")


def test_value_loss_squared_huber_and_ppo_clipping():
    rng = np.random.default_rng(10)
    targets = rng.normal(size=(T, B)).astype(np.float32) * 3
    v = rng.normal(size=(T, B)).astype(np.float32)
    old = v + rng.normal(size=(T, B)).astype(np.float32)
    np.testing.assert_allclose(float(pl.value_loss(targets, v)), np.mean((targets - v) ** 2), rtol=1e-5)
    err = np.abs(targets - v)
    huber = np.where(err <= 1.0, 0.5 * err ** 2, err - 0.5)
    np.testing.assert_allclose(float(pl.value_loss(targets, v, huber_delta=1.0)), huber.mean(), rtol=1e-5)
    clipped_v = np.clip(v, old - 0.2, old + 0.2)
    expected = np.maximum((targets - v) ** 2, (targets - clipped_v) ** 2).mean()
    np.testing.assert_allclose(float(pl.value_loss(targets, v, old, clip_eps=0.2)), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="old_predictions"):
        pl.value_loss(targets, v, clip_eps=0.2)


def test_kl_regularizer_terms_and_an_entropy_constraint():
    from seed_rl.ops.distributions import Categorical

    rng = np.random.default_rng(11)
    pi = tf.constant(rng.normal(size=(T, B, 4)).astype(np.float32))
    mu = tf.constant(rng.normal(size=(T, B, 4)).astype(np.float32))
    dist = Categorical(4)
    p = tf.nn.softmax(pi).numpy()
    q = tf.nn.softmax(mu).numpy()
    kl_pm = (p * (np.log(p) - np.log(q))).sum(-1)
    kl_mp = (q * (np.log(q) - np.log(p))).sum(-1)
    kl_ref = (0.25 * (np.log(0.25) - np.log(p))).sum(-1)
    entropy = -(p * np.log(p)).sum(-1)
    reg = pl.KLRegularizer(kl_pi_mu=0.5, kl_mu_pi=0.25, entropy=0.1, kl_ref_pi=2.0)
    per_step, global_loss, metrics = reg(dist, pi, mu)
    np.testing.assert_allclose(per_step.numpy(), 0.5 * kl_pm + 0.25 * kl_mp - 0.1 * entropy + 2.0 * kl_ref,
                               rtol=1e-4, atol=1e-5)
    assert float(global_loss) == 0.0
    np.testing.assert_allclose(float(metrics["policy/entropy"]), entropy.mean(), rtol=1e-5)
    # A Lagrange coefficient on -entropy with threshold -1: the entropy is below 1 here, so the adjustment
    # loss's gradient raises the coefficient (d/d param of alpha * (threshold - E[-H]) < 0).
    low = tf.constant(np.array([[[5.0, 0.0, 0.0, 0.0]]], np.float32))  # entropy about 0.1
    coefficient = pl.LagrangeCoefficient(threshold=-1.0)
    with tf.GradientTape() as tape:
        _, global_loss, _ = pl.KLRegularizer(entropy=coefficient)(dist, low, low)
    assert float(tape.gradient(global_loss, coefficient.param)) < 0
    with pytest.raises(ValueError, match="unknown terms"):
        pl.KLRegularizer(kl=1.0)
