"""The read-ahead window of one actor stream, the same on every carrier of the learner's ``Stream``.

A stream answers its messages in the order they came, with up to ``MAX_READ_AHEAD`` of them queued with the
batcher at once. :class:`StreamWindow` keeps that bookkeeping: the queued, unanswered messages (``outstanding``,
oldest first), the room left for more, whether the stream is closed (what is unanswered is then withdrawn) and why
the session core ended it. Each carrier drives it with its own primitive and keeps only its I/O:

* the thread-pool gRPC servicer (seed_rl/transport/thread_server.py): a reader thread waits for room on a
  ``threading.Semaphore``; the call's thread answers in order;
* the grpc.aio servicer (seed_rl/transport/aio_server.py): the same with coroutines and an ``asyncio.Semaphore``;
* the same-host stream (seed_rl/transport/local_server.py): a reader thread, and whichever thread finishes an
  answer writes the ready ones to the socket under the window's lock.

The carrier waits for room itself (``room.acquire()``, blocking or awaited), then calls :meth:`StreamWindow.admit`;
the lock is uncontended on the grpc.aio loop, whose carrier touches the window from the loop thread only.

Learner side only: an actor never imports this module. Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Any, Callable, Generic, Protocol, TypeVar

from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.transport.session import MAX_READ_AHEAD, Refusal, Session, SessionCore, StreamHandle

__all__ = ["StreamWindow"]


class _Room(Protocol):
    def release(self) -> Any: ...


_R = TypeVar("_R", bound=_Room)


class StreamWindow(Generic[_R]):
    """One stream's unanswered messages and the room for more (see the module doc).

    Args:
      core: the server's session core (it validates, queues, counts and withdraws the messages).
      semaphore: the carrier's semaphore type (``threading.Semaphore``, ``asyncio.Semaphore``); ``room`` is one
        of them with ``MAX_READ_AHEAD`` places, which the carrier acquires before :meth:`admit`.

    ``outstanding`` and ``closed`` change under ``lock``. ``ended`` is the status the session core ended the
    stream with (a newer stream of the session, the idle watchdog); the carrier's ``end`` callback sets it.
    """

    __slots__ = ("closed", "core", "ended", "lock", "outstanding", "room", "stream")

    def __init__(self, core: SessionCore, semaphore: Callable[[int], _R]) -> None:
        self.core = core
        self.room: _R = semaphore(MAX_READ_AHEAD)
        self.lock = threading.Lock()
        self.outstanding: collections.deque[concurrent.futures.Future] = collections.deque()
        self.closed = False
        self.ended: Refusal | None = None
        self.stream: StreamHandle | None = None  # once attached

    def attach(self, session: Session, carrier: str, end: Callable[[Refusal], None]) -> StreamHandle:
        """Registers the stream with the session core (``SessionCore.attach_stream``; raises its Refusal)."""
        self.stream = self.core.attach_stream(session, carrier, end, self.busy)
        return self.stream

    def busy(self) -> bool:
        """Whether messages are unanswered (the idle watchdog leaves the stream alone then)."""
        return bool(self.outstanding)

    def admit(self, session: Session, message: pb.StepBatch) -> concurrent.futures.Future | None:
        """Queues ``message`` once the carrier has taken a place of ``room``; None when the stream is closed.

        Raises:
          Refusal: the core refused the message (or it ended the stream).
        """
        if self.closed:
            return None
        future = self.core.submit(session, message, self.stream)
        with self.lock:
            if self.closed:
                future.cancel()
                return None
            self.outstanding.append(future)
            self.core.add_inflight(1)
        return future

    def answered(self, future: concurrent.futures.Future) -> None:
        """The carrier took the outcome of ``future``, the oldest unanswered message: frees its place (nothing
        once the stream is closed: ``close`` withdrew it)."""
        assert self.stream is not None
        self.stream.touch()  # before the answer leaves `outstanding`: the stream never looks idle early
        with self.lock:
            outstanding = self.outstanding
            if self.closed or not outstanding or outstanding[0] is not future:
                return
            outstanding.popleft()
        self.core.add_inflight(-1)
        self.room.release()

    def freed(self, answered: int) -> None:
        """``answered`` messages left ``outstanding`` (popped by the carrier under ``lock``): frees their places."""
        self.core.add_inflight(-answered)
        for _ in range(answered):
            self.room.release()

    def take_unanswered(self) -> list[concurrent.futures.Future]:
        """Empties ``outstanding`` (call under ``lock``); the caller withdraws what it returns."""
        doomed = list(self.outstanding)
        self.outstanding.clear()
        return doomed

    def close(self) -> bool:
        """Withdraws every unanswered message (the actor is gone or the stream ended); True for the call that
        closed it, False once closed."""
        with self.lock:
            if self.closed:
                return False
            self.closed = True
            doomed = self.take_unanswered()
        self.core.withdraw(doomed)  # a message already in the handler finishes; its answer goes nowhere
        self.room.release()  # a reader waiting for room wakes, sees `closed` and ends
        return True

    def detach(self) -> None:
        """Tells the session core that the stream is gone (once, when the carrier's stream ends)."""
        if self.stream is not None:
            self.core.detach_stream(self.stream)
