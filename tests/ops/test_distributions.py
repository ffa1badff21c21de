"""Tests for seed_rl.ops.distributions, against numpy written from the definitions."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops import distributions
from seed_rl.types import ArraySpec


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def random_logits(*shape, seed=0, scale=2.0):
    return (scale * np.random.default_rng(seed).normal(size=shape)).astype(np.float32)


CATEGORICAL = distributions.Categorical(5)


def test_param_size_is_the_number_of_actions():
    assert CATEGORICAL.param_size() == 5
    assert distributions.Categorical().param_size(7) == 7
    with pytest.raises(ValueError, match="number of actions"):
        distributions.Categorical().param_size()


@pytest.mark.parametrize("offset", [0.0, 1000.0])  # Large logits must not overflow.
def test_log_prob_matches_numpy(offset):
    logits = random_logits(4, 3, 5, seed=1) + offset
    actions = np.random.default_rng(2).integers(0, 5, size=(4, 3)).astype(np.int32)
    log_prob = CATEGORICAL.log_prob(logits, actions).numpy()
    expected = np.take_along_axis(log_softmax(logits.astype(np.float64)), actions[..., None], -1)[
        ..., 0
    ]
    assert log_prob.shape == (4, 3)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5, atol=1e-5)


def test_log_prob_rejects_bad_actions():
    logits = random_logits(3, 5)
    with pytest.raises(TypeError, match="integers"):
        CATEGORICAL.log_prob(logits, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="shape"):
        CATEGORICAL.log_prob(logits, np.zeros((3, 1), np.int32))


def test_entropy_of_uniform_is_log_num_actions():
    for num_actions in (1, 2, 6, 18):
        entropy = (
            distributions.Categorical().entropy(np.zeros((2, num_actions), np.float32)).numpy()
        )
        np.testing.assert_allclose(entropy, [np.log(num_actions)] * 2, rtol=1e-6, atol=1e-7)


def test_entropy_matches_numpy_and_handles_masked_actions():
    logits = random_logits(6, 5, seed=3)
    log_p = log_softmax(logits.astype(np.float64))
    np.testing.assert_allclose(
        CATEGORICAL.entropy(logits), -(np.exp(log_p) * log_p).sum(-1), rtol=1e-5, atol=1e-6
    )
    # A masked action (logit -inf) has probability 0 and contributes nothing, not NaN.
    masked = np.array([[0.0, 0.0, -np.inf], [3.0, -np.inf, -np.inf]], np.float32)
    np.testing.assert_allclose(
        distributions.Categorical().entropy(masked), [np.log(2), 0.0], atol=1e-6
    )


def test_kl_divergence():
    p_logits = random_logits(10, 5, seed=4)
    q_logits = random_logits(10, 5, seed=5)
    np.testing.assert_allclose(
        CATEGORICAL.kl_divergence(p_logits, p_logits), np.zeros(10), atol=1e-6
    )
    # KL is invariant to a constant shift of the logits.
    np.testing.assert_allclose(
        CATEGORICAL.kl_divergence(p_logits, p_logits + 3.0), np.zeros(10), atol=1e-5
    )
    kl = CATEGORICAL.kl_divergence(p_logits, q_logits).numpy()
    log_p, log_q = (
        log_softmax(p_logits.astype(np.float64)),
        log_softmax(q_logits.astype(np.float64)),
    )
    np.testing.assert_allclose(kl, (np.exp(log_p) * (log_p - log_q)).sum(-1), rtol=1e-5, atol=1e-6)
    assert (kl >= 0).all() and (kl > 0).any()


def test_mode_is_argmax():
    logits = random_logits(4, 3, 5, seed=6)
    mode = CATEGORICAL.mode(logits)
    assert mode.dtype == tf.int32
    np.testing.assert_array_equal(mode, logits.argmax(-1))


def test_sample_shape_dtype_and_range():
    logits = random_logits(2, 3, 5, seed=7)
    actions = CATEGORICAL.sample(logits, seed=1)
    assert actions.dtype == tf.int32 and actions.shape == (2, 3)
    assert ((actions.numpy() >= 0) & (actions.numpy() < 5)).all()
    assert CATEGORICAL.sample(logits[0, 0], seed=1).shape == ()
    # A masked action is never drawn.
    masked = np.tile(np.array([[0.0, -np.inf, 0.0]], np.float32), (1000, 1))
    assert 1 not in distributions.Categorical().sample(masked, seed=2).numpy()


def test_sample_frequencies_match_softmax():
    num_samples = 20_000
    logits = np.array([[1.0, 0.0, -1.0, 2.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    actions = (
        distributions.Categorical()
        .sample(np.broadcast_to(logits, (num_samples, 2, 4)), seed=42)
        .numpy()
    )
    probs = np.exp(log_softmax(logits.astype(np.float64)))
    for row in range(2):
        frequencies = np.bincount(actions[:, row], minlength=4) / num_samples
        # Five standard errors of a frequency estimated from num_samples draws.
        tolerance = 5 * np.sqrt(probs[row] * (1 - probs[row]) / num_samples)
        assert (np.abs(frequencies - probs[row]) <= tolerance).all(), (frequencies, probs[row])


def test_methods_work_in_tf_function():
    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None, 5], tf.float32)])
    def all_methods(logits):
        actions = CATEGORICAL.sample(logits, seed=3)
        return actions, CATEGORICAL.log_prob(logits, actions), CATEGORICAL.entropy(logits)

    actions, log_prob, entropy = all_methods(random_logits(3, 2, 5, seed=8))
    assert actions.shape == log_prob.shape == entropy.shape == (3, 2)


def test_get_distribution_for_discrete_spec():
    dist = distributions.get_distribution(ArraySpec(shape=(), dtype="int32", num_values=6))
    assert isinstance(dist, distributions.Categorical)
    assert dist.param_size() == 6


def test_get_distribution_for_multi_discrete_and_bounded_continuous_specs():
    multi = distributions.get_distribution(ArraySpec(shape=(3,), dtype="int32", num_values=4))
    assert isinstance(multi, distributions.MultiCategorical) and multi.param_size() == 12
    box = ArraySpec(shape=(2,), dtype="float32", minimum=[-1.0, -1.0], maximum=1.0)
    tanh = distributions.get_distribution(box)
    assert isinstance(tanh, distributions.TanhNormal) and tanh.param_size() == 4
    assert isinstance(distributions.get_distribution(box, continuous="clipped"), distributions.ClippedNormal)


@pytest.mark.parametrize(
    "spec,match",
    [
        (ArraySpec(shape=(2,), dtype="float32", minimum=-2.0, maximum=2.0), r"bounded to \[-1, 1\]"),
        (ArraySpec(shape=(2,), dtype="float32"), r"bounded to \[-1, 1\]"),
        (ArraySpec(shape=(2, 2), dtype="float32", minimum=-1.0, maximum=1.0), "float vector of shape"),
        (ArraySpec(shape=(3, 2), dtype="int32", num_values=4), r"shape \(\) or \(D,\)"),
    ],
)
def test_get_distribution_rejects_unsupported_specs(spec, match):
    with pytest.raises(ValueError, match=match):
        distributions.get_distribution(spec)


def test_get_distribution_rejects_non_specs():
    with pytest.raises(TypeError, match="ArraySpec"):
        distributions.get_distribution({"action": ArraySpec(shape=(), dtype="int32", num_values=4)})


# -- continuous and multi-discrete distributions --------------------------------------------------------------------
def _np_std(raw):
    return np.log1p(np.exp(raw)) + 1e-3  # softplus_default_std


def _np_normal_log_prob(x, loc, std):
    return -0.5 * ((x - loc) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def _params(loc, raw):
    return np.concatenate([np.asarray(loc, np.float32), np.asarray(raw, np.float32)], axis=-1)


def test_std_functions_are_the_originals():
    np.testing.assert_allclose(distributions.softplus_default_std(tf.constant(0.0)).numpy(), np.log(2) + 1e-3,
                               rtol=1e-6)
    for make in (distributions.softplus_std, distributions.safe_exp_std):
        fn = make(std_for_zero_param=0.5, min_std=0.01)
        np.testing.assert_allclose(fn(tf.constant(0.0)).numpy(), 0.5, rtol=1e-5)
        assert float(fn(tf.constant(-100.0))) >= 0.01 - 1e-6
        with pytest.raises(ValueError, match="std_for_zero_param > min_std"):
            make(std_for_zero_param=0.01, min_std=0.01)
    # safe_exp clips the value at exp(15) but keeps the gradient of the clipped point.
    x = tf.constant(40.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = distributions.safe_exp_std(1.0, 0.0)(x)
    assert np.isfinite(float(y)) and float(tape.gradient(y, x)) > 1e6


def test_log_ndtr_matches_the_normal_cdf_into_the_far_tail():
    import math
    z = np.array([-35.0, -20.0, -8.0, -5.01, -5.0, -4.99, -1.0, 0.0, 2.0, 6.0], np.float32)
    expected = [math.log(0.5 * math.erfc(-float(v) / math.sqrt(2))) for v in z]
    np.testing.assert_allclose(distributions._log_ndtr(tf.constant(z)).numpy(), expected, rtol=2e-4, atol=1e-6)


def test_normal_log_prob_entropy_and_kl_in_closed_form():
    rng = np.random.default_rng(0)
    normal = distributions.Normal(3)
    assert normal.param_size() == 6
    loc, raw = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    p = _params(loc, raw)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    std = _np_std(raw)
    np.testing.assert_allclose(normal.log_prob(p, x).numpy(), _np_normal_log_prob(x, loc, std).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(normal.entropy(p).numpy(), (0.5 * np.log(2 * np.pi * np.e * std ** 2)).sum(-1),
                               rtol=1e-5, atol=1e-5)
    # KL against a Monte Carlo estimate E_p[log p - log q].
    q = _params(rng.normal(size=(4, 3)), rng.normal(size=(4, 3)))
    q_loc, q_std = q[:, :3], _np_std(q[:, 3:])
    samples = loc + std * rng.normal(size=(200_000, 4, 3))
    mc = (_np_normal_log_prob(samples, loc, std) - _np_normal_log_prob(samples, q_loc, q_std)).sum(-1).mean(0)
    np.testing.assert_allclose(normal.kl_divergence(p, q).numpy(), mc, rtol=0.03, atol=0.01)
    np.testing.assert_allclose(normal.kl_divergence(p, p).numpy(), 0.0, atol=1e-6)
    draws = normal.sample(np.repeat(p[:1], 100_000, axis=0), seed=1).numpy()
    np.testing.assert_allclose(draws.mean(0), loc[0], atol=0.02)
    np.testing.assert_allclose(draws.std(0), std[0], rtol=0.02)
    np.testing.assert_allclose(normal.mode(p).numpy(), loc, rtol=1e-6)


def test_tanh_normal_log_prob_is_the_density_of_squashed_samples():
    """Change of variables checked by Monte Carlo: the fraction of tanh(u) samples in a small bin around a, over
    the bin width, is exp(log_prob(a)); and the density integrates to 1 over (-1, 1) with the boundary masses."""
    dist = distributions.TanhNormal(1)
    rng = np.random.default_rng(1)
    for loc, raw in ((0.3, 0.2), (-1.2, -1.0), (2.0, 0.5)):
        p = _params([loc], [raw])
        std = _np_std(raw)
        a = np.tanh(loc + std * rng.normal(size=4_000_000))
        points = np.array([-0.9, -0.5, 0.0, 0.4, 0.8, 0.95], np.float32)
        h = 0.01
        empirical = np.array([np.mean(np.abs(a - x) < h) / (2 * h) for x in points])
        density = np.exp(dist.log_prob(np.repeat(p[None], len(points), 0), points[:, None]).numpy())
        mask = empirical > 0.05  # bins with enough samples for a 5% comparison
        np.testing.assert_allclose(density[mask], empirical[mask], rtol=0.05)
        grid = np.linspace(-dist.threshold, dist.threshold, 200_001, dtype=np.float64)
        inside = np.exp(dist.log_prob(np.repeat(p[None], len(grid), 0), grid[:, None].astype(np.float32)).numpy())
        edge_mass = (1 - dist.threshold) * (np.exp(dist.log_prob(p[None], [[-1.0]]).numpy())
                                            + np.exp(dist.log_prob(p[None], [[1.0]]).numpy()))
        total = np.trapezoid(inside, grid) + float(edge_mass[0])
        np.testing.assert_allclose(total, 1.0, atol=2e-3)


def test_tanh_normal_at_the_bounds_is_finite_and_has_gradients():
    import math
    dist = distributions.TanhNormal(2)
    p = tf.constant(_params([[0.5, -0.5]], [[0.0, 0.0]]))
    actions = tf.constant([[1.0, -1.0]])
    with tf.GradientTape() as tape:
        tape.watch(p)
        lp = dist.log_prob(p, actions)
    grad = tape.gradient(lp, p).numpy()
    assert np.isfinite(lp.numpy()).all() and np.isfinite(grad).all() and np.abs(grad).sum() > 0
    # At the bound: the tail's mass beyond atanh(threshold), over 1 - threshold.
    std = float(_np_std(0.0))
    edge = math.atanh(dist.threshold)
    right = 0.5 * math.erfc((edge - 0.5) / std / math.sqrt(2))
    left = 0.5 * math.erfc((edge - 0.5) / std / math.sqrt(2))  # mirror of the second dimension (loc -0.5)
    expected = math.log(right / (1 - dist.threshold)) + math.log(left / (1 - dist.threshold))
    np.testing.assert_allclose(lp.numpy(), [expected], rtol=1e-4)


def test_tanh_normal_entropy_kl_sample_and_mode():
    dist = distributions.TanhNormal(2)
    rng = np.random.default_rng(2)
    loc, raw = rng.normal(size=(1, 2)), rng.normal(size=(1, 2))
    p = _params(loc, raw)
    many = np.repeat(p, 200_000, axis=0)
    samples = dist.sample(many, seed=3)
    assert np.all(np.abs(samples.numpy()) < 1)
    # The one-sample entropy estimate averages to -E[log p(a)].
    mc = -float(tf.reduce_mean(dist.log_prob(many, tf.clip_by_value(samples, -0.999, 0.999))))
    np.testing.assert_allclose(float(tf.reduce_mean(dist.entropy(many, seed=4))), mc, rtol=0.02, atol=0.02)
    q = _params(rng.normal(size=(1, 2)), rng.normal(size=(1, 2)))
    np.testing.assert_allclose(dist.kl_divergence(p, q).numpy(), distributions.Normal(2).kl_divergence(p, q).numpy())
    np.testing.assert_allclose(dist.mode(p).numpy(), np.tanh(loc), rtol=1e-6)


def test_clipped_normal_clips_samples_and_scores_as_the_normal():
    dist = distributions.ClippedNormal(2)
    p = _params([[0.9, -0.9]], [[1.0, 1.0]])
    s = dist.sample(np.repeat(p, 10_000, 0), seed=5).numpy()
    assert s.min() == -1.0 and s.max() == 1.0
    x = np.array([[0.2, -1.0]], np.float32)
    np.testing.assert_allclose(dist.log_prob(p, x).numpy(), distributions.Normal(2).log_prob(p, x).numpy())
    np.testing.assert_allclose(dist.mode(_params([[3.0, -0.5]], [[0.0, 0.0]])).numpy(), [[1.0, -0.5]])


def test_multi_categorical_is_independent_categoricals():
    dist = distributions.MultiCategorical(3, 4)
    assert dist.param_size() == 12
    logits = random_logits(5, 12, seed=3)
    per_dim = logits.reshape(5, 3, 4)
    actions = np.random.default_rng(4).integers(0, 4, (5, 3)).astype(np.int32)
    lp = log_softmax(per_dim)
    expected = np.take_along_axis(lp, actions[..., None], -1)[..., 0].sum(-1)
    np.testing.assert_allclose(dist.log_prob(logits, actions).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(logits).numpy(), -(np.exp(lp) * lp).sum(-1).sum(-1), rtol=1e-5)
    other = random_logits(5, 12, seed=5)
    lq = log_softmax(other.reshape(5, 3, 4))
    np.testing.assert_allclose(dist.kl_divergence(logits, other).numpy(),
                               (np.exp(lp) * (lp - lq)).sum(-1).sum(-1), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(dist.mode(logits).numpy(), per_dim.argmax(-1))
    sample = dist.sample(logits, seed=1).numpy()
    assert sample.shape == (5, 3) and sample.min() >= 0 and sample.max() < 4
