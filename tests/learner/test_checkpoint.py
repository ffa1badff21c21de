"""Checkpoints hold every weight of every network (Keras 3 layers kept in lists included) and restore them into a
freshly built agent, as `seed-rl eval` and a resumed learner do."""

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
