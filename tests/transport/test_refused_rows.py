"""Refused rows and the door, on every carrier (issue 31): the same-host socket, the thread-pool gRPC server and
the grpc.aio server (the contract suite's ``cluster`` fixture, from tests/transport/conftest.py).

The handler refuses every row whose observation starts with ``POISON`` (as the learner's inference step refuses a
row whose network output is not finite) and acts on the others with the contract suite's actions.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from seed_rl.transport import InvalidRequestError, RowsRefusedError
from seed_rl.transport.batcher import PartialAnswer
from seed_rl.types import ArraySpec, EnvOutput, StepBatch
from tests.transport.test_contract import LIVENESS_S, Handler, background, expected_actions, make_step

pytestmark = pytest.mark.timeout(60)

POISON = 200  # (make_step's observations hold the step number, below 200 here)
CAUSE = "the network's output for it is not finite"


class RefusingHandler(Handler):
    """Refuses the rows whose observation starts with POISON; records each call's env ids."""

    def __call__(self, batch: StepBatch):
        actions = super().__call__(batch)
        poisoned = np.asarray(batch.env_outputs.observation).reshape(len(batch.env_ids), -1)[:, 0] == POISON
        if not poisoned.any():
            return actions
        return PartialAnswer(actions, [CAUSE if p else "" for p in poisoned])


def poisoned_step(env_ids, step: int, rows) -> StepBatch:
    batch = make_step(env_ids, step=step)
    batch.env_outputs.observation[list(rows)] = POISON
    return batch


def test_a_refused_row_is_refused_to_its_own_message_and_the_batch_is_served(cluster):
    """Two clients' messages in one inference call (batch 4, a long wait): client 0's row of env 1 is refused, its
    row of env 0 acted on; client 1 gets its actions from the same call."""
    handler = RefusingHandler()
    server = cluster.server(handler, inference_batch_size=4, max_batch_wait_ms=2000.0)
    bad, good = cluster.client(server, 0), cluster.client(server, 1)
    refused = background(bad.step, poisoned_step([0, 1], 3, rows=[1]))
    actions = good.step(make_step([2, 3], step=3))
    assert actions.tolist() == expected_actions([2, 3], 3)
    with pytest.raises(RowsRefusedError) as error:
        refused.result(LIVENESS_S)
    assert error.value.env_ids == [1] and error.value.reason == "refused-rows"
    assert f"env ids [1]: {CAUSE}" in str(error.value) and "task 0" in str(error.value)
    assert error.value.actions.tolist() == [expected_actions([0], 3)[0], 0]  # env 0 acted on; env 1's zeroed
    assert sorted(handler.calls[0]["env_ids"]) == [0, 1, 2, 3]  # one call held both messages
    # The stream stays open: the next clean message is answered.
    assert bad.step(make_step([0, 1], step=4)).tolist() == expected_actions([0, 1], 4)
    stats = server.stats()
    assert stats["refused_messages_total"] == 1 and stats["refused_rows_total"] == 1


def test_a_stream_refused_too_often_in_a_row_is_closed_and_the_others_are_served(cluster):
    handler = RefusingHandler()
    server = cluster.server(handler, max_refused_in_a_row=3)
    bad, good = cluster.client(server, 0), cluster.client(server, 1)
    for step in range(2):
        with pytest.raises(RowsRefusedError):
            bad.step(poisoned_step([0, 1], step, rows=[0, 1]))
    bad.step(make_step([0, 1], step=2))  # a clean answer starts the count again
    for step in range(3, 5):
        with pytest.raises(RowsRefusedError):
            bad.step(poisoned_step([0, 1], step, rows=[0]))
        assert good.step(make_step([2, 3], step=step)).tolist() == expected_actions([2, 3], step)
    with pytest.raises(InvalidRequestError, match="3 answers in a row had refused rows") as closed:
        bad.step(poisoned_step([0, 1], 5, rows=[0]))
    assert closed.value.reason == "refused-rows"
    assert good.step(make_step([2, 3], step=6)).tolist() == expected_actions([2, 3], 6)
    assert server.stats()["refused_rows_streams_closed_total"] == 1


FLOAT_SPEC = ArraySpec((3,), "float32")


def _float_step(env_ids, reward: float = 0.0, observation: float = 0.0) -> StepBatch:
    k = len(env_ids)
    return StepBatch(np.asarray(env_ids, np.int32), np.ones(k, np.int64),
                     EnvOutput(np.full(k, reward, np.float32), np.zeros(k, bool),
                               np.full((k, 3), observation, np.float32), np.zeros(k, bool), np.zeros(k, np.int32)),
                     np.full(k, reward, np.float32))


@pytest.mark.parametrize("field, flag", [("reward", "max_abs_reward"), ("observation", "max_abs_observation")])
def test_the_door_refuses_extreme_values_naming_the_flag(cluster, field, flag):
    handler = Handler()
    server = cluster.server(handler, observation_spec=FLOAT_SPEC, max_abs_reward=100.0, max_abs_observation=10.0)
    bad, good = cluster.client(server, 0), cluster.client(server, 1)
    bad.step(_float_step([0, 1], **{field: 10.0}))  # at the bound: taken
    with pytest.raises(InvalidRequestError) as refused:
        bad.step(_float_step([0, 1], **{field: 3e38}))
    assert flag in str(refused.value) and "env ids [0, 1]" in str(refused.value), str(refused.value)
    assert refused.value.reason == "invalid-message"
    assert good.step(_float_step([2, 3])).tolist() == expected_actions([2, 3], 0)
    assert len(handler.calls) == 2  # the refused message never reached the handler


def test_an_open_door_takes_extreme_values(cluster):
    handler = Handler()
    server = cluster.server(handler, observation_spec=FLOAT_SPEC, max_abs_reward=0.0, max_abs_observation=0.0)
    client = cluster.client(server, 0)
    assert client.step(_float_step([0, 1], reward=3e38, observation=-3e38)).tolist() == expected_actions([0, 1], 0)


def test_refused_rows_under_many_clients_never_fail_the_others(cluster):
    """Eight clients step together; the even tasks poison one row in every other message. No good message ever
    fails, and each poisoned answer names only its own env."""
    handler = RefusingHandler()
    server = cluster.server(handler, num_envs=16, inference_batch_size=8, max_refused_in_a_row=100)
    errors: list = []

    def step(client, ids, task: int, step: int) -> None:
        poison = task % 2 == 0 and step % 2 == 0
        try:
            actions = client.step(poisoned_step(ids, step, rows=[1]) if poison else make_step(ids, step))
        except RowsRefusedError as e:
            assert poison and e.env_ids == [ids[1]], (task, step, e)
            return
        assert not poison and actions.tolist() == expected_actions(ids, step)

    def run(task: int) -> None:
        client = cluster.client(server, task)
        ids = [2 * task, 2 * task + 1]
        for n in range(20):
            try:
                step(client, ids, task, n)
            except BaseException as e:  # noqa: BLE001 - collected for the main thread
                errors.append((task, n, e))

    threads = [threading.Thread(target=run, args=(task,)) for task in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LIVENESS_S * 3)
    assert not errors, errors
