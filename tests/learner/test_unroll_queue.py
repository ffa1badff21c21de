"""The unroll queue: chunks in, batches of exactly n out, in order, with priorities, bounded, closable."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from seed_rl.learner.data import QueueClosed, UnrollQueue
from seed_rl.types import Unroll


def _chunk(first: int, count: int) -> Unroll:
    """``count`` unrolls whose every leaf holds its unroll's number (first, first + 1, ...)."""
    ids = np.arange(first, first + count)
    return Unroll(agent_state=(ids.astype(np.float32),), prev_actions=np.repeat(ids[:, None], 3, 1).astype(np.int32),
                  env_outputs=(), agent_outputs=(), policy_version=np.repeat(ids[:, None], 3, 1))


def test_batches_of_exactly_n_in_put_order_across_chunks():
    q = UnrollQueue(capacity=100)
    q.put(_chunk(0, 3))
    q.put(_chunk(3, 5))
    q.put(_chunk(8, 2))
    assert q.qsize() == 10
    first, p1 = q.get_batch(4)  # the whole first chunk and one unroll of the second
    second, _ = q.get_batch(6)
    assert p1 is None and q.qsize() == 0
    np.testing.assert_array_equal(first.policy_version[:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(second.policy_version[:, 0], [4, 5, 6, 7, 8, 9])
    np.testing.assert_array_equal(second.agent_state[0], [4, 5, 6, 7, 8, 9])
    assert second.prev_actions.shape == (6, 3) and second.prev_actions.dtype == np.int32
    assert isinstance(second, Unroll) and second.env_outputs == ()


def test_priorities_travel_with_their_unrolls():
    q = UnrollQueue(capacity=100)
    q.put(_chunk(0, 2), np.array([0.5, 1.5]))
    q.put(_chunk(2, 3), np.array([2.0, 3.0, 4.0]))
    batch, priorities = q.get_batch(3)
    np.testing.assert_array_equal(batch.policy_version[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(priorities, [0.5, 1.5, 2.0])
    _, rest = q.get_batch(2)
    np.testing.assert_array_equal(rest, [3.0, 4.0])


def test_a_put_waits_while_the_queue_holds_its_capacity():
    q = UnrollQueue(capacity=4)
    q.put(_chunk(0, 4))
    done = threading.Event()

    def put():
        q.put(_chunk(4, 2))
        done.set()

    threading.Thread(target=put, daemon=True).start()
    assert not done.wait(0.3)  # full: the producer (the inference step) waits, SEED's back-pressure
    q.get_batch(1)
    assert done.wait(5)
    assert q.qsize() == 5  # at most capacity + chunk - 1


def test_a_batch_larger_than_the_capacity_does_not_stall():
    q = UnrollQueue(capacity=2)
    out = {}

    def consume():
        out["batch"], _ = q.get_batch(6)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    for first in range(0, 6, 2):
        q.put(_chunk(first, 2))
    consumer.join(5)
    np.testing.assert_array_equal(out["batch"].policy_version[:, 0], np.arange(6))


def _raises_closed(fn) -> threading.Thread:
    def run():
        try:
            fn()
        except QueueClosed:
            errors.append(fn)

    errors: list = []
    thread = threading.Thread(target=run, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_close_wakes_a_waiting_consumer_or_producer(side):
    q = UnrollQueue(capacity=1)
    if side == "producer":
        q.put(_chunk(0, 1))  # full: the next put waits
    waiting = _raises_closed(lambda: q.put(_chunk(1, 1)) if side == "producer" else q.get_batch(3))
    time.sleep(0.3)
    assert waiting.is_alive()
    q.close()
    waiting.join(5)
    assert not waiting.is_alive() and len(waiting.errors) == 1  # type: ignore[attr-defined]
    with pytest.raises(QueueClosed):
        q.put(_chunk(5, 1))
