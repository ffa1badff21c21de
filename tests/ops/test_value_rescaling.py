"""Tests for seed_rl.ops.value_rescaling.

The references are the literal formulas of Pohlen et al. 2018 / R2D2 evaluated in float64 numpy (the module
evaluates cancellation-free rearrangements), plus hand values, the original SEED RL learner_test anchors
(h(3) = 1 + 3e-3, round trip on [-100, 100]) and structural properties (odd, monotonic, h(0) = 0).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops.value_rescaling import inverse_value_rescaling, value_rescaling

EPS = 1e-3


def h_paper(x, eps=EPS):
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x, literally, in float64."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + eps * x


def h_inv_paper(x, eps=EPS):
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), literally, in float64."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * (((np.sqrt(1 + 4 * eps * (np.abs(x) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1)


def wide_range(num=20001):
    """-1e5 .. 1e5, log-spaced in magnitude so small values are covered too, plus 0."""
    magnitudes = np.logspace(-6, 5, num // 2)
    return np.concatenate([-magnitudes[::-1], [0.0], magnitudes]).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------------
# Against the paper's formulas.
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.5])
def test_h_matches_paper_formula(eps):
    x = wide_range()
    np.testing.assert_allclose(value_rescaling(x, eps).numpy(), h_paper(x, eps), rtol=1e-6, atol=0)


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.5])
def test_h_inverse_matches_paper_formula(eps):
    y = h_paper(wide_range(), eps).astype(np.float32)
    # float64 reference; the float32 implementation is a few ulps away (no cancellation near 0).
    np.testing.assert_allclose(inverse_value_rescaling(y, eps).numpy(), h_inv_paper(y, eps), rtol=2e-6, atol=0)


def test_h_with_zero_epsilon_is_the_pure_square_root_squash():
    x = wide_range()
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(
        value_rescaling(x, 0.0).numpy(), np.sign(x64) * (np.sqrt(np.abs(x64) + 1.0) - 1.0), rtol=1e-6, atol=0
    )


# ---------------------------------------------------------------------------------------------------------------
# Round trips.
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-3, 1e-2])
def test_inverse_of_h_is_identity(eps):
    # Both maps have relative condition number in [1/2, 1], so the float32 round trip keeps ~1e-6 relative error.
    x = wide_range()
    np.testing.assert_allclose(inverse_value_rescaling(value_rescaling(x, eps), eps).numpy(), x, rtol=2e-6, atol=0)


@pytest.mark.parametrize("eps", [1e-3, 1e-2])
def test_h_of_inverse_is_identity(eps):
    # Rescaled values from -h(1e5) to h(1e5) (about +-416 for eps = 1e-3).
    limit = float(h_paper(1e5, eps))
    magnitudes = np.logspace(-6, np.log10(limit), 5000)
    y = np.concatenate([-magnitudes[::-1], [0.0], magnitudes]).astype(np.float32)
    np.testing.assert_allclose(value_rescaling(inverse_value_rescaling(y, eps), eps).numpy(), y, rtol=2e-6, atol=0)


def test_round_trip_in_float64_is_exact_to_float64_precision():
    x = tf.constant(np.linspace(-1e5, 1e5, 4001), tf.float64)
    y = value_rescaling(x)
    assert y.dtype == tf.float64
    np.testing.assert_allclose(inverse_value_rescaling(y).numpy(), x.numpy(), rtol=1e-12, atol=1e-12)


def test_original_learner_test_round_trip():
    """The original learner_test: h^-1(h(x)) ~ x for x in np.linspace(-100, 100) (50 points), one at a time."""
    for x in np.linspace(-100.0, 100.0):
        np.testing.assert_allclose(inverse_value_rescaling(value_rescaling(x)).numpy(), x, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# Hand values and properties.
# ---------------------------------------------------------------------------------------------------------------


def test_hand_values():
    x = np.array([0.0, 3.0, -3.0, 8.0, 99.0, -99.0, 1e4], np.float32)
    expected = [
        0.0,
        (2 - 1) + 3e-3,  # sqrt(3 + 1) = 2: the original learner_test's 1 + 3e-3.
        -((2 - 1) + 3e-3),
        (3 - 1) + 8e-3,  # sqrt(9) = 3.
        (10 - 1) + 99e-3,  # sqrt(100) = 10.
        -((10 - 1) + 99e-3),
        (np.sqrt(10001) - 1) + 10.0,
    ]
    np.testing.assert_allclose(value_rescaling(x).numpy(), expected, rtol=1e-6, atol=0)
    # And back: the original needed atol = 2e-4 here with the literal formula; the rearranged one is exact to ulps.
    np.testing.assert_allclose(inverse_value_rescaling(np.float32(expected)).numpy(), x, rtol=1e-6, atol=0)


def test_inverse_hand_values():
    # eps = 0.5: s = sqrt(1 + 2 (|x| + 1.5)); for x = 0.5: s = sqrt(5), z = (sqrt(5) - 1) / 1, h^-1 = z^2 - 1.
    z = np.sqrt(5.0) - 1.0
    np.testing.assert_allclose(inverse_value_rescaling(0.5, 0.5).numpy(), z**2 - 1, rtol=1e-6)
    np.testing.assert_allclose(inverse_value_rescaling(-0.5, 0.5).numpy(), -(z**2 - 1), rtol=1e-6)
    # h(3) with eps = 0.5 is 1 + 1.5 = 2.5.
    np.testing.assert_allclose(value_rescaling(3.0, 0.5).numpy(), 1 + 0.5 * 3, rtol=1e-6)
    np.testing.assert_allclose(inverse_value_rescaling(1 + 0.5 * 3, 0.5).numpy(), 3.0, rtol=1e-6)


def test_zero_maps_to_zero_exactly():
    assert value_rescaling(0.0).numpy() == 0.0
    assert inverse_value_rescaling(0.0).numpy() == 0.0


def test_original_learner_test_magnitudes():
    assert value_rescaling(1000.0).numpy() > 10.0
    assert value_rescaling(-1000.0).numpy() < -10.0


def test_odd_symmetry():
    x = wide_range()
    np.testing.assert_array_equal(value_rescaling(-x).numpy(), -value_rescaling(x).numpy())
    np.testing.assert_array_equal(inverse_value_rescaling(-x).numpy(), -inverse_value_rescaling(x).numpy())


def test_strictly_increasing():
    # Spacing well above float32 resolution so that strictness is a property of h, not of rounding.
    x = np.concatenate([-np.logspace(5, -3, 3000), np.logspace(-3, 5, 3000)]).astype(np.float32)
    assert np.all(np.diff(value_rescaling(x).numpy()) > 0)
    y = np.concatenate([-np.logspace(3, -3, 3000), np.logspace(-3, 3, 3000)]).astype(np.float32)
    assert np.all(np.diff(inverse_value_rescaling(y).numpy()) > 0)


def test_squashes_large_values_and_is_near_identity_slope_at_zero():
    # h'(0) = 1/2 + eps; h grows like sqrt(|x|) + eps |x|.
    assert abs(value_rescaling(1e-4).numpy() / 1e-4 - (0.5 + EPS)) < 1e-4
    assert value_rescaling(1e4).numpy() < 1e4 / 50


def test_gradients_match_the_analytic_derivative():
    x = tf.constant([-50.0, -1.0, 0.5, 20.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = value_rescaling(x)
        x_back = inverse_value_rescaling(y)
    dh = tape.gradient(y, x).numpy()
    expected = 1 / (2 * np.sqrt(np.abs(x.numpy()) + 1)) + EPS
    np.testing.assert_allclose(dh, expected, rtol=1e-5)
    # d/dx h^-1(h(x)) = 1.
    np.testing.assert_allclose(tape.gradient(x_back, x).numpy(), np.ones(4), rtol=1e-5)


def test_keeps_shape_and_dtype():
    x = tf.random.normal([3, 4, 5], stddev=100.0, dtype=tf.float64)
    for fn in (value_rescaling, inverse_value_rescaling):
        y = fn(x)
        assert y.shape == x.shape and y.dtype == tf.float64


def test_epsilon_as_a_scalar_tensor():
    x = np.array([3.0, -7.0], np.float32)
    np.testing.assert_allclose(
        value_rescaling(x, tf.constant(0.01)).numpy(), value_rescaling(x, 0.01).numpy(), rtol=1e-7
    )
    np.testing.assert_allclose(
        inverse_value_rescaling(x, tf.constant(0.01, tf.float64)).numpy(),
        inverse_value_rescaling(x, 0.01).numpy(),
        rtol=1e-7,
    )


def test_works_in_tf_function_with_unknown_shape():
    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def round_trip(x):
        return inverse_value_rescaling(value_rescaling(x))

    for shape in ((3, 2), (7, 5)):
        x = np.random.default_rng(0).normal(scale=1e3, size=shape).astype(np.float32)
        np.testing.assert_allclose(round_trip(x).numpy(), x, rtol=2e-6)
    assert round_trip.experimental_get_tracing_count() == 1


# ---------------------------------------------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [value_rescaling, inverse_value_rescaling])
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool])
def test_non_float_tensors_raise_type_error(fn, dtype):
    with pytest.raises(TypeError, match="floating"):
        fn(tf.zeros([2], dtype))


@pytest.mark.parametrize("fn,eps", [(value_rescaling, -1e-3), (inverse_value_rescaling, 0.0)])
def test_bad_epsilon_raises(fn, eps):
    with pytest.raises(ValueError, match="epsilon"):
        fn(1.0, eps)


def test_non_scalar_epsilon_raises():
    with pytest.raises(ValueError, match="epsilon.*scalar"):
        value_rescaling(1.0, tf.constant([1e-3, 1e-3]))
