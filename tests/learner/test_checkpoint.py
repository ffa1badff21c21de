"""Checkpoints hold every weight of every network (Keras 3 layers kept in lists included) and restore them into a
freshly built agent, as `seed-rl eval` and a resumed learner do."""

import os

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.agents.r2d2 import R2D2Config
from seed_rl.agents.r2d2.agent import R2D2Agent
from seed_rl.agents.vtrace import VTraceConfig
from seed_rl.agents.vtrace.agent import VTraceAgent
from seed_rl.types import ArraySpec

CASES = [
    ("mlp", lambda: VTraceAgent(VTraceConfig(network="mlp", mlp_sizes=(8, 8), lstm_size=0,
                                             separate_value_network=True), ArraySpec((4,), "float32"),
                                ArraySpec((), "int32", num_values=2))),
    ("impala", lambda: VTraceAgent(VTraceConfig(lstm_size=16), ArraySpec((84, 84, 1), "uint8"),
                                   ArraySpec((), "int32", num_values=6))),
    ("r2d2", lambda: R2D2Agent(R2D2Config(lstm_size=16, hidden_size=16), ArraySpec((84, 84, 1), "uint8"),
                               ArraySpec((), "int32", num_values=6), num_envs=4)),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_checkpoint_restores_every_variable(tmp_path, name, make):
    trained = make()
    for v in trained.network.variables:
        if "float" in str(v.dtype):
            v.assign(tf.random.normal(v.shape, seed=1))
    path = tf.train.Checkpoint(**trained.checkpoint_items()).save(str(tmp_path / "ckpt"))
    fresh = make()
    tf.train.Checkpoint(**fresh.checkpoint_items()).restore(path).assert_consumed()
    assert len(fresh.network.variables) == len(trained.network.variables)
    for a, b in zip(trained.network.variables, fresh.network.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_best_checkpoint_keeps_only_improvements_and_survives_a_restart(tmp_path):
    from seed_rl.evaluate import checkpoint_path
    from seed_rl.learner.checkpoints import BestCheckpoint, read_best_record

    logdir = str(tmp_path)
    weight = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(w=weight)
    best = BestCheckpoint(logdir, checkpoint)
    assert best.record is None and best.value == float("-inf")
    assert best.maybe_save(float("-inf"), 1, 100, 20, False) is None  # no full window yet
    assert best.maybe_save(10.0, 5, 1_000, 20, False).endswith("ckpt-5")
    weight.assign(2.0)
    assert best.maybe_save(9.0, 6, 2_000, 20, False) is None  # worse: the best stays
    weight.assign(3.0)
    assert best.maybe_save(12.5, 7, 3_000, 20, True).endswith("ckpt-7")
    assert sorted(os.listdir(best.directory)) == ["best.json", "checkpoint", "ckpt-7.data-00000-of-00001",
                                                  "ckpt-7.index"]
    record = read_best_record(logdir)
    assert (record["checkpoint"], record["mean_return"], record["env_frames"], record["eval_episodes"]) == \
        (7, 12.5, 3_000, True)
    assert record["policy_version"] == 7 and record["saved_at_frames"] == 3_000 and "last 20 episodes" in \
        record["statistic"]
    # A restarted learner reads the record and only replaces it with a better window.
    again = BestCheckpoint(logdir, checkpoint)
    assert again.value == 12.5 and again.maybe_save(11.0, 9, 4_000, 20, True) is None
    restored = tf.Variable(0.0)
    tf.train.Checkpoint(w=restored).restore(checkpoint_path(logdir, "best")).expect_partial()
    assert restored.numpy() == 3.0
