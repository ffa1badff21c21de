"""A learner whose inference step fails on every batch stops with that error instead of serving errors forever
(each actor would otherwise exit and be restarted by the launcher, endlessly)."""

import threading

import numpy as np
import pytest

from seed_rl.config import EnvConfig, replace
from seed_rl.configs import get_preset
from seed_rl.learner.learner import MAX_CONSECUTIVE_INFERENCE_FAILURES, Learner
from seed_rl.transport import LearnerClient, TransportError
from seed_rl.types import EnvOutput, StepBatch


def test_learner_stops_when_its_inference_step_keeps_failing(tmp_path):
    config = get_preset("classic_vtrace")
    config = replace(config, env=EnvConfig(family="test", name="counting:length=4,num_actions=2"),
                     run=replace(config.run, logdir=str(tmp_path / "run"), num_actors=1, env_batch_size=2,
                                 server_address="127.0.0.1:0", inference_batch_size=2))
    learner = Learner(config)
    calls = []

    def broken(*args):
        calls.append(1)
        raise FloatingPointError("NaN in the policy logits")

    learner.inference = broken
    port = learner.start()
    failure = []

    def run():
        try:
            learner.run()
        except BaseException as e:  # noqa: BLE001 - checked below
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    obs = np.zeros((2, 4), np.int32)
    step = StepBatch(np.arange(2, dtype=np.int32), np.ones(2, np.int64),
                     EnvOutput(np.zeros(2, np.float32), np.zeros(2, bool), obs, np.zeros(2, bool),
                               np.zeros(2, np.int32)), np.zeros(2, np.float32))
    with LearnerClient(f"127.0.0.1:{port}", 0, connect_timeout_s=30) as client:
        client.handshake()
        for _ in range(MAX_CONSECUTIVE_INFERENCE_FAILURES + 5):
            try:
                client.step(step)
            except TransportError as e:
                if "NaN in the policy logits" not in str(e):
                    break  # the learner is stopping
            if not thread.is_alive():
                break
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(calls) >= MAX_CONSECUTIVE_INFERENCE_FAILURES
    assert failure and isinstance(failure[0], RuntimeError)
    with pytest.raises(RuntimeError, match=f"failed {MAX_CONSECUTIVE_INFERENCE_FAILURES} times in a row: "
                                           "FloatingPointError: NaN in the policy logits"):
        raise failure[0]
