"""The guard on every update (issue 31): an optimizer update whose loss or gradients are not finite is skipped
(weights, optimizer slots and iteration count unchanged), counted as ``learner/skipped_updates``, logged once per
cause; the learner stops after ``max_skipped_updates`` train steps in a row with every update skipped; and no
checkpoint is written with non-finite variables.

One device here (float16 in test_loss_scale.py; the precisions and mirrored in test_devices.py's probe).
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.learner.checkpoints import BestCheckpoint, RunCheckpoint
from seed_rl.learner.training import SkippedUpdatesError, SkipTracker, Trainer
from seed_rl.types import LossResult, QueueFeed, UpdateSchedule
from tests.agents import test_contract as contract


def _state(agent, optimizer) -> list:
    return [v.numpy().copy() for v in agent.trainable_variables + list(optimizer.variables)]


def _same(a: list, b: list) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def _vtrace(batch=4, schedule=None):
    agent = contract._build("vtrace", "vector", seed=1)
    optimizer = agent.make_optimizer(100)
    trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64), schedule=schedule)
    unroll = tf.nest.map_structure(
        lambda t: t.numpy(), contract._random_unroll(agent, "vector", np.random.default_rng(0), batch_major=True,
                                                     batch=batch))
    return agent, optimizer, trainer, unroll


def _with_rewards(unroll, value, rows=slice(None)):
    reward = unroll.env_outputs.reward.copy()
    reward[rows] = value
    return unroll._replace(env_outputs=unroll.env_outputs._replace(reward=reward))


@pytest.mark.parametrize("bad", [np.nan, np.inf, 3e38], ids=["nan", "inf", "extreme"])
def test_a_non_finite_loss_is_skipped_and_changes_nothing(bad):
    agent, optimizer, trainer, unroll = _vtrace()
    trainer.step(unroll)  # the optimizer's slots exist and hold values
    before, iterations = _state(agent, optimizer), int(optimizer.iterations.numpy())
    metrics = trainer.step(_with_rewards(unroll, bad)).metrics
    assert float(metrics["learner/skipped_updates"]) == 1.0 and float(metrics["learner/grad_norm"]) == 0.0
    assert _same(before, _state(agent, optimizer)) and int(optimizer.iterations.numpy()) == iterations
    assert int(trainer.policy_version.numpy()) == 2  # the batch was consumed: the train step counts
    metrics = trainer.step(unroll).metrics  # a finite batch trains again
    assert float(metrics["learner/skipped_updates"]) == 0.0 and int(optimizer.iterations.numpy()) == iterations + 1
    assert not _same(before, _state(agent, optimizer))


class _SqrtAgent:
    """loss = sqrt(w - c) at w == c: the loss is 0, its gradient infinite."""

    schedule = UpdateSchedule()
    feed = QueueFeed()

    def __init__(self):
        self.w = tf.Variable(1.0)
        self.c = tf.Variable(1.0, trainable=False)
        self.trainable_variables = [self.w]

    def loss(self, unroll, weights=None):
        del unroll, weights
        loss = tf.sqrt(self.w - self.c)
        return LossResult(loss, {"losses/total": loss})

    def update_targets(self, update):
        del update
        return tf.constant(False)


def test_a_finite_loss_with_an_infinite_gradient_is_skipped():
    agent = _SqrtAgent()
    optimizer = tf.keras.optimizers.SGD(0.1)
    trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64))
    _, _, _, unroll = _vtrace()
    metrics = trainer.step(unroll).metrics
    assert float(metrics["losses/total"]) == 0.0 and float(metrics["learner/skipped_updates"]) == 1.0
    assert float(agent.w.numpy()) == 1.0 and int(optimizer.iterations.numpy()) == 0
    agent.c.assign(0.0)  # sqrt(1 - 0): a finite gradient, applied
    assert float(trainer.step(unroll).metrics["learner/skipped_updates"]) == 0.0
    assert float(agent.w.numpy()) < 1.0


@pytest.mark.parametrize("epochs", [1, 2])
def test_of_several_minibatches_only_the_poisoned_one_is_skipped(epochs):
    """Epochs of two minibatches, without shuffling: minibatch 0 holds sequences 0-1 (poisoned), minibatch 1
    sequences 2-3. Minibatch 0's update is skipped in every epoch, the other applied; the step reports the sum."""
    schedule = UpdateSchedule(epochs=epochs, minibatches=2, shuffle=False)
    agent, optimizer, trainer, unroll = _vtrace(schedule=schedule)
    before = _state(agent, optimizer)
    metrics = trainer.step(_with_rewards(unroll, np.inf, rows=slice(0, 2))).metrics
    assert float(metrics["learner/skipped_updates"]) == epochs
    assert int(optimizer.iterations.numpy()) == epochs and not _same(before, _state(agent, optimizer))
    assert all(np.isfinite(v.numpy()).all() for v in agent.trainable_variables)
    assert int(trainer.policy_version.numpy()) == 1


def test_the_skip_tracker_logs_each_cause_once_and_stops_after_the_limit(caplog):
    tracker = SkipTracker(limit=3, log=logging.getLogger("test_guard"))
    nan = float("nan")
    with caplog.at_level(logging.WARNING, logger="test_guard"):
        assert not tracker.record(0, 1, {"losses/total": 1.0}, 0)
        assert tracker.record(1, 1, {"losses/total": nan, "losses/baseline": nan, "losses/entropy": 0.5}, 1)
        assert tracker.record(1, 1, {"losses/total": nan, "losses/baseline": nan}, 2)  # same cause: no new line
        assert tracker.record(1, 4, {"losses/total": 1.0}, 3)  # 1 of 4 skipped: "gradients"; not all in a row
        assert tracker.in_a_row == 0 and tracker.total == 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "not finite: losses/baseline, losses/total" in lines[0] and "train step 1" in lines[0]
    assert "not finite: gradients" in lines[1]
    tracker.record(1, 1, {}, 4)
    tracker.record(1, 1, {}, 5)
    with pytest.raises(SkippedUpdatesError, match=r"every update of the last 3 train steps was skipped .*"
                                                  r"--max_skipped_updates"):
        tracker.record(1, 1, {}, 6)


def _checkpoint_items():
    net = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    net.build((None, 3))
    optimizer = tf.keras.optimizers.Adam()
    optimizer.build(net.trainable_variables)
    return net, dict(net=net, optimizer=optimizer, train_steps=tf.Variable(0, dtype=tf.int64))


def test_no_checkpoint_is_written_with_non_finite_variables(tmp_path, caplog):
    net, items = _checkpoint_items()
    checkpoints = RunCheckpoint(str(tmp_path), items)
    first = checkpoints.save(1)
    assert first and checkpoints.manager.latest_checkpoint == first
    kernel = net.layers[0].kernel
    kernel.assign(np.full(kernel.shape, np.nan, np.float32))
    with caplog.at_level(logging.ERROR, logger="seed_rl.learner"):
        assert checkpoints.save(2) is None
    assert "not writing the checkpoint: variables not finite" in caplog.text and "kernel" in caplog.text
    assert checkpoints.manager.latest_checkpoint == first
    assert not any(name.startswith("ckpt-2") for name in os.listdir(tmp_path / "checkpoints"))

    best = BestCheckpoint(str(tmp_path), checkpoints.checkpoint, items)
    assert best.maybe_save(10.0, 2, 100, 20, False) is None and best.record is None
    kernel.assign(np.zeros(kernel.shape, np.float32))
    assert best.maybe_save(10.0, 2, 100, 20, False) and best.record["mean_return"] == 10.0
    assert checkpoints.save(3)


def test_the_skip_warning_names_the_envs_with_the_largest_values(caplog):
    """A queue feed knows the env ids of its batch's unrolls: the warning names those with the largest rewards."""
    _, _, _, unroll = _vtrace(batch=4)
    poisoned = _with_rewards(unroll, 3e38, rows=[2])
    tracker = SkipTracker(limit=10, log=logging.getLogger("test_guard"))
    with caplog.at_level(logging.WARNING, logger="test_guard"):
        tracker.record(1, 1, {"losses/total": float("inf")}, 7, poisoned, np.array([10, 11, 12, 13]))
    assert "largest |reward| or |observation| in the batch: env 12 (3e+38)" in caplog.text, caplog.text


def test_the_unroll_queue_carries_the_env_ids_of_its_unrolls():
    from seed_rl.learner.data import QueueSource, UnrollQueue

    queue = UnrollQueue(8)
    queue.put({"x": np.arange(3)}, env_ids=np.array([4, 5, 6]))
    queue.put({"x": np.arange(3, 5)})  # put without: -1
    batch, weights, indices, env_ids = QueueSource(queue, 4).next_batch()
    assert batch["x"].tolist() == [0, 1, 2, 3] and env_ids.tolist() == [4, 5, 6, -1]
    assert weights is None and indices is None
