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
    @tf.function(input_signature=[tf.TensorSpec([None, None, 5], tf.float32)])
    def all_methods(logits):
        actions = CATEGORICAL.sample(logits, seed=3)
        return actions, CATEGORICAL.log_prob(logits, actions), CATEGORICAL.entropy(logits)

    actions, log_prob, entropy = all_methods(random_logits(3, 2, 5, seed=8))
    assert actions.shape == log_prob.shape == entropy.shape == (3, 2)


def test_get_distribution_for_discrete_spec():
    dist = distributions.get_distribution(ArraySpec(shape=(), dtype="int32", num_values=6))
    assert isinstance(dist, distributions.Categorical)
    assert dist.param_size() == 6


@pytest.mark.parametrize(
    "spec,match",
    [
        (
            ArraySpec(shape=(2,), dtype="float32", minimum=-1.0, maximum=1.0),
            "continuous.*later issue",
        ),
        (ArraySpec(shape=(3,), dtype="int32", num_values=4), "multi-discrete"),
    ],
)
def test_get_distribution_rejects_unsupported_specs(spec, match):
    with pytest.raises(ValueError, match=match):
        distributions.get_distribution(spec)


def test_get_distribution_rejects_non_specs():
    with pytest.raises(TypeError, match="ArraySpec"):
        distributions.get_distribution({"action": ArraySpec(shape=(), dtype="int32", num_values=4)})
