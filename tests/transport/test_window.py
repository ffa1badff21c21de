"""The stream window's bookkeeping (seed_rl/transport/window.py) on a fake session core: what each carrier relies
on. The carriers themselves are held to the contract in test_contract.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from seed_rl.transport.session import MAX_READ_AHEAD, Refusal
from seed_rl.transport.window import StreamWindow


class FakeStream:
    touched = 0

    def touch(self) -> None:
        self.touched += 1


class FakeCore:
    """Queues every message as a fresh future; counts in-flight messages and withdrawals as SessionCore does."""

    def __init__(self) -> None:
        self.inflight = 0
        self.withdrawn: list[concurrent.futures.Future] = []
        self.refuse: Refusal | None = None

    def attach_stream(self, session, carrier, end, busy):
        return FakeStream()

    def detach_stream(self, stream) -> None:
        self.detached = stream

    def submit(self, session, message, stream) -> concurrent.futures.Future:
        if self.refuse is not None:
            raise self.refuse
        return concurrent.futures.Future()

    def add_inflight(self, n: int) -> None:
        self.inflight += n

    def withdraw(self, futures) -> None:
        for future in futures:
            future.cancel()
        self.withdrawn += futures
        self.inflight -= len(futures)


def _window() -> tuple[StreamWindow, FakeCore]:
    core = FakeCore()
    window = StreamWindow(core, threading.Semaphore)
    window.attach(None, "test", lambda refusal: None)
    return window, core


def test_answers_free_their_places_oldest_first():
    window, core = _window()
    futures = []
    for _ in range(MAX_READ_AHEAD):
        assert window.room.acquire(blocking=False)
        futures.append(window.admit(None, None))
    assert not window.room.acquire(blocking=False)  # the window is full
    assert core.inflight == MAX_READ_AHEAD and window.busy()
    window.answered(futures[1])  # not the oldest: nothing changes
    assert core.inflight == MAX_READ_AHEAD
    window.answered(futures[0])
    assert core.inflight == MAX_READ_AHEAD - 1 and window.room.acquire(blocking=False)
    assert window.stream.touched == 2  # every answer restarts the idle clock


def test_close_withdraws_the_unanswered_once_and_refuses_more():
    window, core = _window()
    first = window.admit(None, None)
    second = window.admit(None, None)
    assert window.close() is True and window.close() is False
    assert core.withdrawn == [first, second] and core.inflight == 0 and not window.busy()
    assert first.cancelled() and second.cancelled()
    assert window.room.acquire(blocking=False)  # a reader waiting for room wakes
    assert window.admit(None, None) is None
    window.answered(first)  # an answer taken after the close frees nothing twice
    assert core.inflight == 0
    window.detach()
    assert core.detached is window.stream


def test_a_refused_message_takes_no_place():
    window, core = _window()
    core.refuse = Refusal(None, "no", "invalid-message")
    with pytest.raises(Refusal):
        window.admit(None, None)
    assert core.inflight == 0 and not window.busy()


def test_the_room_is_the_carriers_primitive():
    async def run() -> bool:
        window = StreamWindow(FakeCore(), asyncio.Semaphore)
        for _ in range(MAX_READ_AHEAD):
            await window.room.acquire()
        return window.room.locked()

    assert asyncio.run(run())
