"""The trainer runs an agent's update schedule: epochs x minibatches of disjoint sequences, the run-wide update
counter handed to ``update_targets``, priorities back in batch order, metrics combined over the updates."""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl.learner.training import Trainer
from seed_rl.types import EnvOutput, LossResult, QueueFeed, Unroll, UpdateSchedule

B, L = 8, 3
MAX_UPDATES = 32


class _Outputs(NamedTuple):
    action: Any


class RecordingAgent:
    """Linear in one weight; records, per optimizer update, the update number and the rows it saw."""

    feed = QueueFeed()
    num_overlapping_steps = 0
    trains_transitions = False

    def __init__(self, schedule: UpdateSchedule, copy_every: int = 0):
        self.schedule = schedule
        self.copy_every = copy_every
        self.w = tf.Variable(1.0)
        self.count = tf.Variable(0, dtype=tf.int64)
        self.updates = tf.Variable(tf.zeros([MAX_UPDATES], tf.int64))
        self.rows = tf.Variable(tf.fill([MAX_UPDATES, B], tf.constant(-1, tf.int64)))

    def loss(self, unroll, weights=None):
        row = tf.cast(unroll.env_outputs.episode_step[0], tf.int64)  # [b]: the batch row of each sequence
        n = tf.shape(row)[0]
        padded = tf.concat([row, tf.fill([B - n], tf.constant(-1, tf.int64))], 0)
        self.rows.scatter_nd_update([[self.count]], padded[None])
        x = tf.cast(row, tf.float32)
        loss = tf.reduce_mean(tf.square(self.w * x - 1.0))
        return LossResult(loss, {"losses/total": loss, "rows/mean": tf.reduce_mean(x)}, x * 10.0)

    def update_targets(self, update):
        self.updates.scatter_nd_update([[self.count]], [update])
        self.count.assign_add(1)
        if not self.copy_every:
            return tf.constant(False)
        return tf.equal(update % self.copy_every, 0)

    @property
    def trainable_variables(self):
        return [self.w]


def _batch() -> Unroll:
    rows = np.repeat(np.arange(B, dtype=np.int32)[:, None], L, axis=1)
    env = EnvOutput(reward=np.zeros([B, L], np.float32), done=np.zeros([B, L], bool),
                    observation=np.zeros([B, L, 1], np.float32), abandoned=np.zeros([B, L], bool),
                    episode_step=rows)
    return Unroll(agent_state=(), prev_actions=np.zeros([B, L], np.int32), env_outputs=env,
                  agent_outputs=_Outputs(np.zeros([B, L], np.int32)), policy_version=np.zeros([B, L], np.int64))


def _trainer(agent, version: int = 0) -> Trainer:
    return Trainer(agent, keras.optimizers.SGD(0.01), tf.Variable(version, dtype=tf.int64), seed=5)


def test_epochs_times_minibatches_updates_over_disjoint_minibatches():
    agent = RecordingAgent(UpdateSchedule(epochs=2, minibatches=4))
    trainer = _trainer(agent)
    w0 = float(agent.w.numpy())
    result = trainer.step(_batch())
    assert int(agent.count.numpy()) == 8 and int(trainer.policy_version.numpy()) == 1
    np.testing.assert_array_equal(agent.updates.numpy()[:8], np.arange(1, 9))
    rows = agent.rows.numpy()[:8, :2]
    for epoch in (rows[:4], rows[4:]):  # each epoch sees every row exactly once, two per minibatch
        assert sorted(epoch.ravel().tolist()) == list(range(B))
    assert rows[:4].tolist() != rows[4:].tolist()  # a fresh permutation per epoch
    rng = np.random.default_rng((5, 0))  # drawn from (seed, policy version)
    np.testing.assert_array_equal(rows, np.concatenate([rng.permutation(B).reshape(4, 2) for _ in range(2)]))
    # Priorities come back in batch order (row i's priority is 10 * i), metrics are means over the updates.
    np.testing.assert_allclose(result.priorities, 10.0 * np.arange(B))
    assert float(result.metrics["rows/mean"]) == pytest.approx((B - 1) / 2)
    assert float(agent.w.numpy()) != w0


def test_repeat_mode_trains_the_same_minibatches_in_batch_order_every_epoch():
    agent = RecordingAgent(UpdateSchedule(epochs=3, minibatches=4, shuffle=False))
    _trainer(agent).step(_batch())
    rows = agent.rows.numpy()[:12, :2]
    expected = np.arange(B).reshape(4, -1)  # minibatch i holds sequences 2i and 2i + 1
    for epoch in (rows[:4], rows[4:8], rows[8:]):
        np.testing.assert_array_equal(epoch, expected)


def test_the_on_policy_batch_modes():
    from seed_rl.agents.policy_gradient.config import PPOConfig

    assert PPOConfig().batch_mode == "shuffle" and PPOConfig(batch_mode="repeat").batch_mode == "repeat"
    for mode in ("split", "split_with_advantage_recomputation"):
        assert PPOConfig(batch_mode=mode).batch_mode == mode
        with pytest.raises(ValueError, match="carry no recurrent state: lstm_size=8 needs batch_mode=shuffle"):
            PPOConfig(batch_mode=mode, lstm_size=8)
    with pytest.raises(ValueError, match="batch_mode must be one of shuffle, repeat, split"):
        PPOConfig(batch_mode="bogus")
    with pytest.raises(ValueError, match="split must be one of none, once, every_epoch"):
        UpdateSchedule(split="twice")
    with pytest.raises(ValueError, match="shuffles its transitions"):
        UpdateSchedule(split="once", shuffle=False)
    # What the trainer reads of a schedule (no split string is compared in the learner).
    assert [UpdateSchedule(split=s).prepares_every_epoch for s in ("none", "once", "every_epoch")] == [
        False, False, True]
    assert [UpdateSchedule(split=s).units for s in ("none", "once")] == ["sequences", "transitions"]
    UpdateSchedule(minibatches=4).check_minibatches(8)
    with pytest.raises(ValueError, match="a batch of 6 transitions does not split into 4 equal minibatches"):
        UpdateSchedule(minibatches=4, split="once").check_minibatches(6)


class SplitRecordingAgent(RecordingAgent):
    """Trains transitions: ``prepare_transitions`` numbers the batch's transitions (``10 * row + step``) and counts
    its calls; ``transition_loss`` records the transitions of every update."""

    trains_transitions = True

    def __init__(self, schedule: UpdateSchedule):
        super().__init__(schedule)
        self.prepared = tf.Variable(0, dtype=tf.int64)
        self.seen = tf.Variable(tf.fill([MAX_UPDATES, B * (L - 1)], tf.constant(-1, tf.int64)))

    def prepare_transitions(self, unroll):
        self.prepared.assign_add(1)
        row = tf.cast(unroll.env_outputs.episode_step[:-1], tf.int64)  # [T, B]
        step = tf.cast(tf.range(L - 1)[:, None], tf.int64) + tf.zeros_like(row)
        return {"id": 10 * row + step, "prepared": tf.fill(tf.shape(row), self.prepared.value())}

    def transition_loss(self, transitions):
        ids = transitions["id"]
        padded = tf.concat([ids, tf.fill([B * (L - 1) - tf.shape(ids)[0]], tf.constant(-1, tf.int64))], 0)
        self.seen.scatter_nd_update([[self.count]], padded[None])
        x = tf.cast(ids, tf.float32)
        loss = tf.reduce_mean(tf.square(self.w * x - 1.0))
        return LossResult(loss, {"losses/total": loss,
                                 "prepared/max": tf.cast(tf.reduce_max(transitions["prepared"]), tf.float32)})


@pytest.mark.parametrize("split, preparations", [("once", 1), ("every_epoch", 3)])
def test_split_schedules_train_shuffled_minibatches_of_transitions(split, preparations):
    agent = SplitRecordingAgent(UpdateSchedule(epochs=3, minibatches=4, split=split))
    trainer = _trainer(agent)
    w0 = float(agent.w.numpy())
    result = trainer.step(_batch())
    assert result.priorities is None and int(trainer.policy_version.numpy()) == 1
    assert int(agent.prepared.numpy()) == preparations  # once per step, or once at the start of every epoch
    assert float(result.metrics["prepared/max"]) == pytest.approx(
        1.0 if split == "once" else np.mean([1] * 4 + [2] * 4 + [3] * 4))
    np.testing.assert_array_equal(agent.updates.numpy()[:12], np.arange(1, 13))
    per_update = (B * (L - 1)) // 4  # 16 transitions in 4 minibatches of 4
    seen = agent.seen.numpy()[:12, :per_update]
    everything = sorted(10 * r + t for r in range(B) for t in range(L - 1))  # not the last (bootstrap) step
    for epoch in (seen[:4], seen[4:8], seen[8:]):  # each epoch trains every transition exactly once
        assert sorted(epoch.ravel().tolist()) == everything
    assert seen[:4].tolist() != seen[4:8].tolist()  # a fresh permutation per epoch
    # Minibatches mix transitions of different sequences: rows are not kept together.
    assert any(len({i // 10 for i in mini}) > 1 for mini in seen[:4])
    assert float(agent.w.numpy()) != w0
    # The draw is (seed, policy version)'s, one permutation of the [T, B]-ordered transitions per epoch.
    ids = np.array([10 * r + t for t in range(L - 1) for r in range(B)])
    rng = np.random.default_rng((5, 0))
    expected = np.concatenate([np.split(ids[rng.permutation(ids.size)], 4) for _ in range(3)])
    np.testing.assert_array_equal(seen, expected)


def test_one_update_of_transitions_still_shuffles_them():
    """Only one update of whole sequences trains the batch as it came; transitions are shuffled even then."""
    agent = SplitRecordingAgent(UpdateSchedule(epochs=1, minibatches=1, split="once"))
    _trainer(agent).step(_batch())
    ids = np.array([10 * r + t for t in range(L - 1) for r in range(B)])
    np.testing.assert_array_equal(agent.seen.numpy()[0], ids[np.random.default_rng((5, 0)).permutation(ids.size)])


def test_a_split_schedule_needs_a_transition_agent_and_divisible_transitions():
    with pytest.raises(ValueError, match="split=once.*RecordingAgent does not .trains_transitions is false"):
        _trainer(RecordingAgent(UpdateSchedule(epochs=1, minibatches=2, split="once")))
    # The trainer goes by the declaration, not by the methods an agent happens to have.
    undeclared = SplitRecordingAgent(UpdateSchedule(epochs=1, minibatches=2, split="once"))
    undeclared.trains_transitions = False
    with pytest.raises(ValueError, match="SplitRecordingAgent does not"):
        _trainer(undeclared)
    agent = SplitRecordingAgent(UpdateSchedule(epochs=1, minibatches=5, split="once"))
    with pytest.raises(ValueError, match="16 transitions does not split into 5"):
        _trainer(agent).step(_batch())


def test_update_counter_continues_across_steps_and_a_resume():
    agent = RecordingAgent(UpdateSchedule(epochs=1, minibatches=2), copy_every=3)
    trainer = _trainer(agent, version=5)  # a resumed run: 5 train steps of 2 updates each are done
    first = trainer.step(_batch())
    second = trainer.step(_batch())
    np.testing.assert_array_equal(agent.updates.numpy()[:4], [11, 12, 13, 14])
    # Update 12 copied the target in the first step, none of 13 and 14 did: the flag is "any", not a mean.
    assert float(first.metrics["learner/target_updated"]) == 1.0
    assert float(second.metrics["learner/target_updated"]) == 0.0
    # The permutation depends on (seed, train step) only: a fresh trainer at step 5 draws the same minibatches.
    again = RecordingAgent(UpdateSchedule(epochs=1, minibatches=2))
    _trainer(again, version=5).step(_batch())
    np.testing.assert_array_equal(again.rows.numpy()[:2], agent.rows.numpy()[:2])


def test_one_by_one_is_a_single_update_on_the_whole_batch():
    agent = RecordingAgent(UpdateSchedule())
    trainer = _trainer(agent, version=2)
    result = trainer.step(_batch())
    assert int(agent.count.numpy()) == 1 and int(agent.updates.numpy()[0]) == 3
    np.testing.assert_array_equal(agent.rows.numpy()[0], np.arange(B))  # unshuffled
    np.testing.assert_allclose(result.priorities, 10.0 * np.arange(B))


def test_a_batch_that_does_not_split_is_refused():
    agent = RecordingAgent(UpdateSchedule(epochs=1, minibatches=3))
    with pytest.raises(ValueError, match="does not split into 3"):
        _trainer(agent).step(_batch())


def _weights_after(trainer: Trainer, agent: RecordingAgent, public: bool, weights=None) -> tuple:
    batch = _batch()
    if public:  # the tf.function's own call, which the trainer's concrete flat call replaces
        out = trainer._compiled(batch, weights, tf.constant(1, tf.int64))
        metrics, priorities = out["metrics"], out.get("priorities")
    else:
        metrics, priorities = trainer._call(batch, weights, 1)
    return float(agent.w.numpy()), {k: float(v) for k, v in metrics.items()}, np.asarray(priorities)


@pytest.mark.parametrize("weighted", [False, True])
def test_the_flat_call_of_the_update_matches_the_tf_function_call(weighted):
    weights = np.linspace(0.5, 1.5, B).astype(np.float32) if weighted else None
    runs = []
    for public in (True, False):
        agent = RecordingAgent(UpdateSchedule())
        runs.append(_weights_after(_trainer(agent), agent, public, weights))
    (w_public, m_public, p_public), (w_flat, m_flat, p_flat) = runs
    assert w_flat == w_public != 1.0
    assert m_flat == m_public
    np.testing.assert_array_equal(p_flat, p_public)


def test_one_concrete_function_per_input_shape():
    agent = RecordingAgent(UpdateSchedule(epochs=2, minibatches=2))
    trainer = _trainer(agent)
    for _ in range(3):
        trainer.step(_batch())
    assert len(trainer._callers) == 1  # every minibatch has the same shapes
    trainer.step(tf.nest.map_structure(lambda x: x[:4], _batch()))  # another batch size: a second function
    assert len(trainer._callers) == 2


def test_the_learning_rate_metric_is_the_optimizers_after_the_step():
    agent = RecordingAgent(UpdateSchedule(epochs=1, minibatches=2))
    schedule = keras.optimizers.schedules.PolynomialDecay(0.1, decay_steps=10, end_learning_rate=0.0)
    trainer = Trainer(agent, keras.optimizers.SGD(schedule), tf.Variable(0, dtype=tf.int64), seed=5)
    result = trainer.step(_batch())  # two updates: the rate after the second, 0.1 * (1 - 2 / 10)
    assert float(result.metrics["learning_rate"]) == pytest.approx(0.08)
    assert float(result.metrics["learning_rate"]) == pytest.approx(trainer.learning_rate())


def test_shapes_that_keep_changing_fall_back_to_the_tf_function(monkeypatch):
    from seed_rl.learner import training

    monkeypatch.setattr(training, "MAX_CONCRETE_UPDATES", 2)
    agent = RecordingAgent(UpdateSchedule())
    trainer = _trainer(agent)
    for size in (8, 6, 4, 2):
        result = trainer.step(tf.nest.map_structure(lambda x, n=size: x[:n], _batch()))
        assert result.priorities.shape == (size,)
    assert len(trainer._callers) == 2 and int(agent.count.numpy()) == 4
