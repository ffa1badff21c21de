"""seed_rl/ops/normalization.py against numpy, and under a mirrored strategy's replica context."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.ops import normalization as norm


def _batches(seed=0, n=6, size=3):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(4, 5, size)) * [1.0, 10.0, 0.1] + [0.0, 5.0, -3.0]).astype(np.float32)
            for _ in range(n)]


def test_average_mean_std_is_the_mean_and_std_of_everything_seen():
    tracker = norm.AverageMeanStd(3)
    mean, std = tracker.mean_std()
    np.testing.assert_allclose(mean.numpy(), 0.0)
    np.testing.assert_allclose(std.numpy(), 1.0)  # before any sample
    batches = _batches()
    for b in batches:
        tracker.update(b)
    seen = np.concatenate([b.reshape(-1, 3) for b in batches]).astype(np.float64)
    mean, std = tracker.mean_std()
    np.testing.assert_allclose(mean.numpy(), seen.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std.numpy(), seen.std(0), rtol=1e-5)
    x = batches[0][0]
    np.testing.assert_allclose(tracker.normalize(x).numpy(), (x - seen.mean(0)) / seen.std(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tracker.unnormalize(tracker.normalize(x)).numpy(), x, rtol=1e-4, atol=1e-4)


def test_average_mean_std_keeps_its_precision_over_many_updates():
    tracker = norm.AverageMeanStd(1)
    update = tf.function(tracker.update, autograph=False)
    for _ in range(2000):
        update(tf.constant([[1e4 + 1.0], [1e4 - 1.0]]))
    mean, std = tracker.mean_std()
    np.testing.assert_allclose(mean.numpy(), [1e4], rtol=1e-7)
    np.testing.assert_allclose(std.numpy(), [1.0], rtol=1e-6)


def test_ema_mean_std_follows_the_moving_averages():
    beta = 0.1
    tracker = norm.EMAMeanStd(3, beta=beta)
    m1, m2 = np.zeros(3), np.ones(3)
    for b in _batches(1):
        tracker.update(b)
        flat = b.reshape(-1, 3).astype(np.float64)
        m1 += beta * (flat.mean(0) - m1)
        m2 += beta * ((flat ** 2).mean(0) - m2)
    mean, std = tracker.mean_std()
    np.testing.assert_allclose(mean.numpy(), m1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std.numpy(), np.clip(np.sqrt(np.maximum(m2 - m1 ** 2, 0)), 1e-6, 1e6), rtol=1e-4)


def test_fixed_mean_std():
    tracker = norm.FixedMeanStd(2, mean=1.0, std=2.0)
    tracker.update(np.ones((3, 2), np.float32))
    np.testing.assert_allclose(tracker.normalize(np.array([[3.0, 1.0]])).numpy(), [[1.0, 0.0]])


def test_under_a_mirrored_strategy_each_replica_tracks_the_whole_batch():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])  # one device here; the all-reduce path still runs
    with strategy.scope():
        tracker = norm.AverageMeanStd(3)
    batches = _batches(2, n=3)

    @tf.function(autograph=False)
    def step(x):
        strategy.run(tracker.update, args=(x,))

    for b in batches:
        step(tf.constant(b))
    seen = np.concatenate([b.reshape(-1, 3) for b in batches]).astype(np.float64)
    mean, std = tracker.mean_std()
    np.testing.assert_allclose(mean.numpy(), seen.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std.numpy(), seen.std(0), rtol=1e-5)


@pytest.mark.parametrize("cls", [norm.EMAMeanStd, norm.AverageMeanStd])
@pytest.mark.parametrize("bad", [np.nan, np.inf, 3e38])
def test_an_update_whose_statistics_would_not_be_finite_changes_nothing(cls, bad):
    """NaN and inf samples, and float32 values whose squares overflow, leave the statistics as they were
    (3e38 squared overflows float32 only: the float64 tracker takes it as a finite, if extreme, sample)."""
    tracker = cls(2)
    tracker.update(np.array([[1.0, 2.0], [3.0, 5.0]], np.float32))
    before = [v.numpy().copy() for v in tracker.variables]
    tracker.update(np.array([[1.0, bad], [3.0, 5.0]], np.float32))
    after = [v.numpy() for v in tracker.variables]
    changed = any(not np.array_equal(a, b) for a, b in zip(before, after))
    if cls is norm.AverageMeanStd and np.isfinite(bad):
        assert changed and all(np.isfinite(a).all() for a in after)
    else:
        assert not changed
    mean, std = tracker.mean_std()
    assert np.isfinite(mean.numpy()).all() and np.isfinite(std.numpy()).all()
