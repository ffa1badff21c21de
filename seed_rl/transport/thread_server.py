"""The ``seed_rl.v1.Learner`` service on a gRPC thread pool: the "threads" server kind.

Each live stream holds a worker thread of the pool (which answers it) and a reader thread (which takes its messages
off the stream), so a learner with N actors runs about 2N threads; grpc.aio's servicer
(seed_rl/transport/aio_server.py) runs them all on one event loop thread instead. Both keep the same contract
through the same :class:`~seed_rl.transport.session.SessionCore` and the same
:class:`~seed_rl.transport.window.StreamWindow`. :func:`start_thread_server` is this carrier's entry "threads" of
``seed_rl.transport.server.CARRIERS``.

Learner side only; imports no TensorFlow.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Iterator

import grpc

from seed_rl.protos import REASON_METADATA_KEY
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.transport.grpc_serving import ServerSettings, bind, learner_service
from seed_rl.transport.session import Refusal, Session, SessionCore, StreamHandle, parse_message
from seed_rl.transport.window import StreamWindow

__all__ = ["ThreadServicer", "start_thread_server"]

_END = object()


class ThreadServicer(pb_grpc.LearnerServicer):
    """The thread-pool servicer: each stream holds one worker thread for its lifetime."""

    def __init__(self, core: SessionCore) -> None:
        self._core = core
        self._active_lock = threading.Lock()
        self.active_streams = 0

    @staticmethod
    def _abort(context: grpc.ServicerContext, abort: Refusal) -> None:
        context.set_trailing_metadata(((REASON_METADATA_KEY, abort.reason),))
        context.abort(abort.code, abort.details)

    def Handshake(self, request: bytes, context: grpc.ServicerContext) -> pb.HandshakeResponse:
        try:
            return self._core.handshake(parse_message(pb.HandshakeRequest, request))
        except Refusal as abort:
            self._abort(context, abort)
            raise  # unreachable: context.abort raises

    def Stream(self, request_iterator: Iterator[bytes], context: grpc.ServicerContext):
        """Answers the stream's messages in the order they came, with several of them in flight.

        A reader thread takes messages off the stream as they arrive and queues them with the batcher at once;
        this thread answers them in order. So an actor may send the next message (e.g. for another group of its
        envs) before the previous answer came back, which is what lets it step some envs while others wait for
        inference. The read-ahead is bounded (a :class:`~seed_rl.transport.window.StreamWindow`): beyond it the
        actor's sends wait in gRPC's flow control. The session core may end the stream from another thread (a
        newer stream of the session, or the idle watchdog): this thread then withdraws what is unanswered and
        reports the status.
        """
        core = self._core
        window = StreamWindow(core, threading.Semaphore)
        results: queue.SimpleQueue = queue.SimpleQueue()  # futures in arrival order, then _END or a Refusal

        def end(refusal: Refusal) -> None:
            """Called by the session core from another thread: the stream ends with ``refusal``."""
            window.ended = refusal
            results.put(refusal)  # wakes this stream's thread if it waits for the next item
            window.close()  # and if it waits for an answer, the answer is cancelled

        def read(session: Session, stream: StreamHandle) -> None:
            room = window.room
            try:
                for data in request_iterator:
                    stream.touch()
                    message = parse_message(pb.StepBatch, data)  # raises Refusal for bytes that are not one
                    room.acquire()
                    future = window.admit(session, message)  # raises Refusal for a refused message
                    if future is None:
                        return  # closed
                    results.put(future)
                results.put(_END)
            except Refusal as abort:
                results.put(abort)
            except Exception:  # noqa: BLE001 - the RPC ended (cancelled, client gone): nothing to answer
                results.put(_END)

        with self._active_lock:
            self.active_streams += 1
        try:
            session = core.open_stream(context.invocation_metadata())
            stream = window.attach(session, "grpc", end)
            context.add_callback(window.close)
            threading.Thread(
                target=read, args=(session, stream), name="seed_rl-stream-reader", daemon=True
            ).start()
            while True:
                item = results.get()
                if item is _END:
                    return
                if isinstance(item, Refusal):
                    raise item
                try:
                    actions = item.result()
                except concurrent.futures.CancelledError:
                    if window.ended is not None:
                        raise window.ended from None
                    return  # the actor is gone; nobody to answer
                except BaseException as e:  # noqa: BLE001 - reported to the actor as a status
                    raise core.abort_for(e) from None
                finally:
                    window.answered(item)
                if window.ended is not None:
                    raise window.ended  # ended while this answer was computed: the stream answers no more
                yield core.answer(stream, actions)
        except Refusal as abort:
            self._abort(context, abort)
        finally:
            window.close()
            window.detach()
            with self._active_lock:
                self.active_streams -= 1


class _ThreadsCarrier:
    """The started thread-pool server (a ``server.RunningCarrier``)."""

    def __init__(self, server: grpc.Server, servicer: ThreadServicer, port: int) -> None:
        self._server, self._servicer, self.port = server, servicer, port

    @property
    def active_streams(self) -> int:
        return self._servicer.active_streams

    def stop(self, grace: float) -> None:
        self._server.stop(grace).wait()


def start_thread_server(settings: ServerSettings, core: SessionCore) -> _ThreadsCarrier:
    """Starts the gRPC server on a pool of ``settings.max_workers`` threads, serving ``core``."""
    servicer = ThreadServicer(core)
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=settings.max_workers, thread_name_prefix="seed_rl-grpc"),
        options=settings.grpc_options,
    )
    server.add_generic_rpc_handlers((learner_service(servicer),))
    port = bind(server, settings)
    server.start()
    return _ThreadsCarrier(server, servicer, port)
