"""The ``seed_rl.v1.Learner`` service on grpc.aio: one event loop thread serves every gRPC stream (the "aio" kind).

The thread-pool servicer (seed_rl/transport/thread_server.py) holds a worker thread and a reader thread per live
stream, so a learner with N actors runs about 2N threads. This servicer runs every handshake and stream as a
coroutine on one asyncio loop (its own thread, :class:`AioLoop`), so the learner's thread count does not grow with
the number of actors. Both servicers keep the same contract through the same
:class:`~seed_rl.transport.session.SessionCore` (validation, the per-session stream rules, the idle timeout,
statuses) and the same :class:`~seed_rl.transport.window.StreamWindow` (read-ahead, answers in arrival order,
withdrawal on close). :class:`~seed_rl.transport.server.InferenceServer` picks one with ``server_kind``
(docs/transport.md, "Server concurrency" has the measurements); :func:`start_aio_server` is this carrier's entry
"aio" of ``seed_rl.transport.server.CARRIERS``.

Imports no TensorFlow.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import grpc

from seed_rl.protos import REASON_METADATA_KEY
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.transport.grpc_serving import ServerSettings, bind, learner_service, refuse_busy_port, with_option
from seed_rl.transport.session import Refusal, Session, SessionCore, StreamHandle, parse_message
from seed_rl.transport.window import StreamWindow

__all__ = ["AIO_LISTENERS", "AioLoop", "AioServicer", "start_aio_server"]

AIO_LISTENERS = 16
"""grpc.aio servers (on one event loop, one port) that the "aio" kind starts. grpc.aio takes up new calls one at
a time per server, a few event-loop iterations each, and an iteration grows with the streams already stepping;
several servers take up calls side by side (docs/transport.md, "Connecting a thousand actors")."""

_log = logging.getLogger(__name__)

_END = object()
DRAIN_CHUNK = 64
"""Answers the loop hands to their streams per iteration (``_Completions``)."""
_T = TypeVar("_T")


class AioLoop:
    """An asyncio event loop running in a daemon thread; :meth:`run` executes a coroutine on it and waits."""

    def __init__(self, name: str = "seed_rl-grpc-aio") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        """Stops the loop (after the coroutines it runs now) and waits for its thread."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self.loop.close()


class _Completions:
    """Hands the batcher's finished futures to the event loop in bursts.

    ``asyncio.wrap_future`` wakes the loop once per future (a write to its self-pipe and a callback each); an
    inference batch finishes hundreds of futures at once. Here the first future of a burst schedules one drain on
    the loop and the others join its list, so the loop wakes once per batch.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[concurrent.futures.Future, asyncio.Future]] = []
        self._scheduled = False

    def wrap(self, future: concurrent.futures.Future) -> asyncio.Future:
        """An asyncio future of the loop that gets ``future``'s outcome (call on the loop thread)."""
        waiter = self._loop.create_future()
        future.add_done_callback(lambda done: self._done(done, waiter))
        return waiter

    def _done(self, future: concurrent.futures.Future, waiter: asyncio.Future) -> None:  # any thread
        with self._lock:
            self._ready.append((future, waiter))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: the server stopped, nobody waits
            pass

    def _drain(self) -> None:  # on the loop thread
        # At most DRAIN_CHUNK per loop iteration, the rest in the next ones: grpc.aio's server takes up new calls
        # (handshakes, new streams) one per loop iteration, so shorter iterations let actors connect while a
        # thousand others are stepping.
        with self._lock:
            ready, self._ready = self._ready[:DRAIN_CHUNK], self._ready[DRAIN_CHUNK:]
            if self._ready:
                self._loop.call_soon(self._drain)
            else:
                self._scheduled = False
        for future, waiter in ready:
            if waiter.done():  # its task was cancelled meanwhile
                continue
            error = None if future.cancelled() else future.exception()
            if future.cancelled():
                waiter.cancel()
            elif error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(future.result())


class AioServicer(pb_grpc.LearnerServicer):
    """The grpc.aio servicer: every stream is a coroutine, no thread is held per stream."""

    def __init__(self, core: SessionCore) -> None:
        self._core = core
        self.active_streams = 0  # changed on the loop thread only; read anywhere
        self._completions: _Completions | None = None  # made on the loop, at the first stream

    @staticmethod
    async def _abort(context: grpc.aio.ServicerContext, refusal: Refusal) -> None:
        await context.abort(
            refusal.code, refusal.details, trailing_metadata=((REASON_METADATA_KEY, refusal.reason),)
        )

    async def Handshake(self, request: bytes, context: grpc.aio.ServicerContext) -> pb.HandshakeResponse:
        try:
            return self._core.handshake(parse_message(pb.HandshakeRequest, request))
        except Refusal as refusal:
            await self._abort(context, refusal)
            raise  # unreachable: context.abort raises

    async def Stream(
        self, request_iterator: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ActionBatch]:
        """Answers the stream's messages in arrival order with up to ``MAX_READ_AHEAD`` of them in flight.

        A reader task takes messages off the stream and queues them with the batcher at once; this coroutine
        awaits their answers in order (the bookkeeping is a :class:`~seed_rl.transport.window.StreamWindow`).
        The session core may end the stream from any thread (a newer stream of the session, the idle watchdog):
        ``end`` hands that to the loop, which withdraws what is unanswered.
        """
        core = self._core
        loop = asyncio.get_running_loop()
        if self._completions is None:
            self._completions = _Completions(loop)
        completions = self._completions
        window = StreamWindow(core, asyncio.Semaphore)
        results: asyncio.Queue = asyncio.Queue()  # futures in arrival order, then _END or a Refusal
        reader: asyncio.Task | None = None

        def end_on_loop(refusal: Refusal) -> None:
            window.ended = refusal
            results.put_nowait(refusal)  # wakes the answering loop if it waits for the next item
            window.close()  # and if it waits for an answer, that answer is cancelled

        def end(refusal: Refusal) -> None:
            """Called by the session core, from any thread: the stream ends with ``refusal``."""
            try:
                loop.call_soon_threadsafe(end_on_loop, refusal)
            except RuntimeError:  # the loop is closed: the server stopped, the stream is gone already
                pass

        async def read(session: Session, stream: StreamHandle) -> None:
            room = window.room
            try:
                async for data in request_iterator:
                    stream.touch()
                    message = parse_message(pb.StepBatch, data)  # raises Refusal for bytes that are not one
                    await room.acquire()
                    future = window.admit(session, message)  # raises Refusal for a refused message
                    if future is None:
                        return  # closed
                    results.put_nowait(future)
                results.put_nowait(_END)
            except Refusal as refusal:
                results.put_nowait(refusal)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the RPC ended (cancelled, client gone): nothing to answer
                results.put_nowait(_END)

        self.active_streams += 1
        try:
            session = core.open_stream(context.invocation_metadata())
            stream = window.attach(session, "grpc", end)
            reader = asyncio.create_task(read(session, stream))
            while True:
                item = await results.get()
                if item is _END:
                    return
                if isinstance(item, Refusal):
                    raise item
                try:
                    actions = await completions.wrap(item)
                except asyncio.CancelledError:
                    # This task was cancelled (the RPC is gone: withdraw the request, as asyncio.wrap_future would;
                    # a no-op once it is answered), or the core withdrew the request (``item`` is cancelled).
                    item.cancel()
                    if not item.cancelled():
                        raise  # the RPC itself was cancelled (the client went away)
                    if window.ended is not None:
                        raise window.ended from None
                    return  # withdrawn: the actor is gone; nobody to answer
                except BaseException as e:  # noqa: BLE001 - reported to the actor as a status
                    raise core.abort_for(e) from None
                finally:
                    window.answered(item)
                if window.ended is not None:
                    raise window.ended  # ended while this answer was computed: the stream answers no more
                yield core.answer(stream, actions)
        except Refusal as refusal:
            await self._abort(context, refusal)
        finally:
            window.close()
            if reader is not None:
                reader.cancel()
            window.detach()
            self.active_streams -= 1


class _AioCarrier:
    """The started grpc.aio servers and their loop (a ``server.RunningCarrier``)."""

    def __init__(self, aio: AioLoop, servers: list[grpc.aio.Server], servicer: AioServicer, port: int) -> None:
        self._aio, self._servers, self._servicer, self.port = aio, servers, servicer, port

    @property
    def active_streams(self) -> int:
        return self._servicer.active_streams

    def stop(self, grace: float) -> None:
        try:
            self._aio.run(_stop_all(self._servers, grace), timeout=grace + 5.0)
        finally:
            self._aio.close()


def start_aio_server(settings: ServerSettings, core: SessionCore) -> _AioCarrier:
    """Starts the grpc.aio servers, serving ``core``, on an event loop thread of their own."""
    aio = AioLoop()
    try:
        servers, servicer, port = aio.run(_start_servers(settings, core))
    except BaseException:
        aio.close()
        raise
    return _AioCarrier(aio, servers, servicer, port)


async def _start_servers(settings: ServerSettings, core: SessionCore) -> tuple[list[grpc.aio.Server], AioServicer, int]:
    """The grpc.aio servers: the first binds the address (a free port for port 0), the others the same port, all
    serving one servicer on this loop."""
    servicer = AioServicer(core)
    shared = settings.aio_listeners > 1
    if shared:
        # SO_REUSEPORT lets every socket that sets it bind the port, also another learner's: refuse a port that
        # something listens on already (the reason server.SERVER_OPTIONS turns it off).
        refuse_busy_port(settings.address)
    options = with_option(settings.grpc_options, "grpc.so_reuseport", int(shared))
    servers: list[grpc.aio.Server] = []
    try:
        for i in range(settings.aio_listeners):
            server = grpc.aio.server(options=options)
            server.add_generic_rpc_handlers((learner_service(servicer),))
            servers.append(server)
            if i == 0:
                port = bind(server, settings)
                host = settings.address.rsplit(":", 1)[0]
            else:
                bind(server, settings, f"{host}:{port}")
            await server.start()
    except BaseException:
        for server in servers:
            await server.stop(None)
        raise
    return servers, servicer, port


async def _stop_all(servers: list, grace: float) -> None:
    await asyncio.gather(*(server.stop(grace) for server in servers))
