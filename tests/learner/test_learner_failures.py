"""A learner whose inference step fails on every batch stops with that error instead of serving errors forever
(each actor would otherwise exit and be restarted by the launcher, endlessly); one whose network went to NaN
refuses each message's rows with words that name the problem, keeps serving, and closes a stream whose answers
keep being refused (issues 10 and 31)."""

import threading

import numpy as np
import pytest

from seed_rl.config import EnvConfig, replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.learner.learner import MAX_CONSECUTIVE_INFERENCE_FAILURES, Learner
from seed_rl.transport import LearnerClient, TransportError
from seed_rl.transport.errors import InvalidRequestError, RowsRefusedError
from seed_rl.types import EnvOutput, StepBatch


def _config(tmp_path, **run):
    config = get_preset("classic_vtrace")
    return replace(config, env=EnvConfig(family="test", name="counting:length=4,num_actions=2"),
                   run=replace_flat(config.run, logdir=str(tmp_path / "run"), num_actors=1, env_batch_size=2,
                                    server_address="127.0.0.1:0", inference_batch_size=2, **run))


def _step_batch():
    obs = np.zeros((2, 4), np.int32)
    return StepBatch(np.arange(2, dtype=np.int32), np.ones(2, np.int64),
                     EnvOutput(np.zeros(2, np.float32), np.zeros(2, bool), obs, np.zeros(2, bool),
                               np.zeros(2, np.int32)), np.zeros(2, np.float32))


def _run_in_thread(learner):
    failure = []

    def run():
        try:
            learner.run()
        except BaseException as e:  # noqa: BLE001 - checked by the tests
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failure


@pytest.mark.parametrize("fast", [True, False], ids=["fast_call", "public_call"])
def test_a_nan_network_gets_each_message_refused_with_a_clear_error_and_the_learner_stays_up(tmp_path, fast):
    """The poisoned policy samples action 2 of 2 (tf.random.categorical on NaN logits), which used to reach the
    actors and the unroll store and then kill the training thread. Now each message's rows are refused, with words
    that say why, the stream stays open, and the learner keeps serving: when the weights are healthy again, steps
    work; a stream whose answers keep being refused is closed after max_refused_in_a_row of them."""
    learner = Learner(_config(tmp_path, fast_inference_call=fast, max_refused_in_a_row=5))
    # The policy head's bias: NaN logits whatever the layers below compute. (A NaN first kernel was used before,
    # but the observations here are zeros, and some CPUs' matrix multiply gives 0 for 0 x NaN, so the logits
    # stayed finite on those machines.)
    weights = learner.agent.network.policy_head.bias
    healthy = weights.numpy()
    weights.assign(np.full_like(healthy, np.nan))
    port = learner.start()
    thread, failure = _run_in_thread(learner)
    refusals = 3  # below max_refused_in_a_row
    try:
        with LearnerClient(f"127.0.0.1:{port}", 0, connect_timeout_s=30) as client:
            client.handshake()
            for _ in range(refusals):
                with pytest.raises(RowsRefusedError) as refused:
                    client.step(_step_batch())
                message = str(refused.value)
                assert refused.value.env_ids == [0, 1] and "env ids [0, 1]" in message, message
                assert "output for it is not finite" in message, message
                assert thread.is_alive() and not learner.done
            assert learner.queue.qsize() == 0 and int(learner.inference.store.index.numpy().sum()) == 0
            assert learner.refused_rows == 2 * refusals
            weights.assign(healthy)
            for _ in range(3):
                actions = client.step(_step_batch())
                assert actions.shape == (2,) and set(actions.tolist()) <= {0, 1}
            assert thread.is_alive() and not learner.done
            # Refused again: after 5 in a row (the healthy answers reset the count) the stream is closed.
            weights.assign(np.full_like(healthy, np.nan))
            for _ in range(4):
                with pytest.raises(RowsRefusedError):
                    client.step(_step_batch())
            with pytest.raises(InvalidRequestError, match="5 answers in a row had refused rows") as closed:
                client.step(_step_batch())
            assert closed.value.reason == "refused-rows"
            assert thread.is_alive() and not learner.done
    finally:
        learner.stop()
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert not failure, failure


def test_learner_stops_when_its_inference_step_keeps_failing(tmp_path):
    learner = Learner(_config(tmp_path))
    calls = []

    def broken(*args):
        calls.append(1)
        raise FloatingPointError("NaN in the policy logits")

    learner.inference = broken
    port = learner.start()
    thread, failure = _run_in_thread(learner)
    step = _step_batch()
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
