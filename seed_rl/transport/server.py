"""The learner's gRPC server: handshake, one bidirectional stream per actor, dynamic batching.

:class:`InferenceServer` implements the ``seed_rl.v1.Learner`` service (seed_rl/protos/seed_rl.proto):

* ``Handshake`` checks the protocol version and the auth token, gives the calling task its env ids
  ``[task * env_batch_size, (task + 1) * env_batch_size)`` and a fresh session id, and returns the specs and the
  config. A newer handshake for the same task supersedes the older session: later messages on the older session's
  stream fail with FAILED_PRECONDITION.
* ``Stream`` validates every message against the session's env ids and the learner's specs before it reaches the
  :class:`~seed_rl.transport.batcher.DynamicBatcher`, which calls the inference handler on batches of rows and
  hands each actor its actions. A bad message aborts only its own stream (INVALID_ARGUMENT); nothing of it
  reaches the handler. A session has one live stream (a newer one supersedes it), a task at most two, and a
  stream that stays idle for ``stream_idle_timeout_s`` is closed, so no client can hold the worker threads that
  handshakes and other actors need (``SessionCore.attach_stream``).

Actors on the learner's host may send their ``Stream`` messages over a Unix socket instead
(seed_rl/transport/local_server.py, offered in the handshake). Both carriers go through the same
:class:`~seed_rl.transport.session.SessionCore` (seed_rl/transport/session.py): sessions, validation, batching.

Every error is a gRPC status whose details say what to do, plus a short reason in the trailing metadata key
``seed-rl-reason``; the table is in docs/transport.md. Imports no TensorFlow.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import errno
import gc
import logging
import queue
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import grpc

from seed_rl.protos import MAX_MESSAGE_BYTES, REASON_METADATA_KEY, codec
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.transport.aio_server import AioLoop, AioServicer
from seed_rl.transport.batcher import DynamicBatcher, Handler
from seed_rl.transport.local import local_stream_supported
from seed_rl.transport.local_server import LocalStreamServer
from seed_rl.transport.session import (
    DEFAULT_MAX_ABS_OBSERVATION,
    DEFAULT_MAX_ABS_REWARD,
    DEFAULT_MAX_REFUSED_IN_A_ROW,
    DEFAULT_STREAM_IDLE_TIMEOUT_S,
    MAX_READ_AHEAD,
    Refusal,
    Session,
    SessionCore,
    StreamHandle,
    parse_message,
    validate_step_batch,
)
from seed_rl.types import ArraySpec, ObservationSpec

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "SERVER_KINDS",
    "SERVER_OPTIONS",
    "InferenceServer",
    "receive_window_bytes",
    "tune_garbage_collector",
    "validate_step_batch",
]

SERVER_KINDS = ("threads", "aio")
"""How the gRPC server runs its streams: "threads" (a worker thread and a reader thread per live stream) or "aio"
(grpc.aio: every stream a coroutine on one event loop thread)."""
AIO_LISTENERS = 16
"""grpc.aio servers (on one event loop, one port) that the "aio" kind starts. grpc.aio takes up new calls one at
a time per server, a few event-loop iterations each, and an iteration grows with the streams already stepping;
several servers take up calls side by side (docs/transport.md, "Connecting a thousand actors")."""

_log = logging.getLogger(__name__)

_END = object()
_DEFAULT_GRACE_S = 0.1
_HANDSHAKE_THREADS = 8  # worker threads that live streams may never take (see InferenceServer's max_workers)


class _Servicer(pb_grpc.LearnerServicer):
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
        inference. The read-ahead is bounded (``MAX_READ_AHEAD`` messages): beyond it the actor's sends wait
        in gRPC's flow control. The session core may end the stream from another thread (a newer stream of the
        session, or the idle watchdog): this thread then withdraws what is unanswered and reports the status.
        """
        core = self._core
        lock = threading.Lock()
        outstanding: collections.deque[concurrent.futures.Future] = collections.deque()
        results: queue.SimpleQueue = queue.SimpleQueue()  # futures in arrival order, then _END or an Refusal
        room = threading.Semaphore(MAX_READ_AHEAD)
        closed = [False]
        ended: list[Refusal | None] = [None]  # why the session core ended this stream
        stream: StreamHandle | None = None

        def close() -> None:
            """Withdraws every unanswered request (the actor is gone or the stream failed); idempotent."""
            with lock:
                if closed[0]:
                    return
                closed[0] = True
                doomed = list(outstanding)
                outstanding.clear()
            core.withdraw(doomed)
            room.release()  # a reader waiting for room wakes, sees `closed` and ends

        def end(refusal: Refusal) -> None:
            """Called by the session core from another thread: the stream ends with ``refusal``."""
            ended[0] = refusal
            results.put(refusal)  # wakes this stream's thread if it waits for the next item
            close()  # and if it waits for an answer, the answer is cancelled

        def read(session: Session, stream: StreamHandle) -> None:
            try:
                for data in request_iterator:
                    stream.touch()
                    message = parse_message(pb.StepBatch, data)  # raises Refusal for bytes that are not one
                    room.acquire()
                    if closed[0]:
                        return
                    future = core.submit(session, message, stream)  # raises Refusal for a refused message
                    with lock:
                        if closed[0]:
                            future.cancel()
                            return
                        outstanding.append(future)
                        core.add_inflight(1)
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
            stream = core.attach_stream(session, "grpc", end, lambda: bool(outstanding))
            context.add_callback(close)
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
                    if ended[0] is not None:
                        raise ended[0] from None
                    return  # the actor is gone; nobody to answer
                except BaseException as e:  # noqa: BLE001 - reported to the actor as a status
                    raise core.abort_for(e) from None
                finally:
                    stream.touch()  # before the answer leaves `outstanding`: the stream never looks idle early
                    with lock:
                        answered = not closed[0]
                        if answered:
                            outstanding.popleft()
                    if answered:
                        core.add_inflight(-1)
                        room.release()
                if ended[0] is not None:
                    raise ended[0]  # ended while this answer was computed: the stream answers no more
                yield core.answer(stream, actions)
        except Refusal as abort:
            self._abort(context, abort)
        finally:
            close()
            if stream is not None:
                core.detach_stream(stream)
            with self._active_lock:
                self.active_streams -= 1


def learner_service(servicer: pb_grpc.LearnerServicer) -> grpc.GenericRpcHandler:
    """The ``seed_rl.v1.Learner`` service of ``servicer`` (either server kind) with raw-bytes requests: the
    servicer parses them itself (``session.parse_message``), so that bytes that are not a ``HandshakeRequest`` or a
    ``StepBatch`` are refused with INVALID_ARGUMENT naming the message, as on the same-host stream, where gRPC's
    own deserializer would fail the call with INTERNAL or UNKNOWN, or (grpc.aio's stream) end it with OK."""
    return grpc.method_handlers_generic_handler("seed_rl.v1.Learner", {
        "Handshake": grpc.unary_unary_rpc_method_handler(
            servicer.Handshake, response_serializer=pb.HandshakeResponse.SerializeToString),
        "Stream": grpc.stream_stream_rpc_method_handler(
            servicer.Stream, response_serializer=pb.ActionBatch.SerializeToString),
    })


class InferenceServer:
    """The learner side of the transport: a gRPC server feeding a :class:`DynamicBatcher`.

    Args:
      address: ``host:port`` to listen on; ``"127.0.0.1:0"`` picks a free port (see :meth:`start`). Use a
        loopback address unless actors run on other hosts, and then prefer TLS (``server_credentials``).
      handler: the inference step, ``StepBatch`` of n rows -> actions ``[n, ...]``; called from one thread.
      num_envs: total envs; env ids lie in ``[0, num_envs)``.
      env_batch_size: envs per actor; task t owns ``[t * env_batch_size, (t + 1) * env_batch_size)``.
      observation_spec: an ArraySpec or a flat dict of them (batch dimension excluded).
      action_spec: the ArraySpec of one env's action, returned in the handshake.
      config_json: the resolved configuration, returned in the handshake.
      inference_batch_size, max_batch_wait_ms, wait_for_full_batch: the batching rule (see the batcher).
      auth_token: when non-empty, actors must present it (handshake field and stream metadata).
      server_kind: "threads" or "aio" (see ``SERVER_KINDS``); the same contract either way. "aio" keeps the
        learner's thread count independent of the number of actors (docs/transport.md, "Server concurrency").
      aio_listeners: "aio" only: grpc.aio servers that share the port (``SO_REUSEPORT``, so the kernel spreads
        the actors' connections over them) and the event loop; each takes up new calls on its own, so actors
        connect that many times faster while others step. Default ``AIO_LISTENERS``; 1: a single server.
      max_workers: "threads" only: worker threads; each live gRPC stream holds one. Default: 2 per task + 8. A task has at most 2
        live streams (its actor's, and a predecessor's that is still open, see ``SessionCore.attach_stream``),
        and gRPC streams beyond ``max_workers - 8`` are refused at once (RESOURCE_EXHAUSTED), so 8 threads are
        always free for handshakes and for streams that are opening. At least 9.
      server_credentials: ``grpc.ssl_server_credentials(...)`` to serve TLS; None serves plaintext.
      local_stream: also serve the same-host stream (a Unix socket, seed_rl/transport/local_server.py) and offer it in
        the handshake; actors on this host then skip gRPC's per-message cost. Linux only (ignored elsewhere).
      stream_idle_timeout_s: a stream (either carrier) that has nothing unanswered and receives no message for
        this long is closed with UNAVAILABLE ``stream-idle`` (the actor reconnects); also the time a same-host
        connection has to send its opening. 0 or less: never.
      max_abs_reward: a message with a reward or raw reward of larger magnitude is refused (INVALID_ARGUMENT);
        0 or less: no bound. ``max_abs_observation``: the same for a value of a float observation leaf.
      max_refused_in_a_row: a stream whose answers had refused rows (:class:`~seed_rl.transport.batcher.PartialAnswer`
        from ``handler``) this many times in a row is closed with INVALID_ARGUMENT ``refused-rows``.
      grpc_options: more gRPC server arguments (``(name, value)`` pairs); each replaces the learner's own of
        the same name (``SERVER_OPTIONS`` and the receive window, ``grpc.http2.lookahead_bytes``).
    """

    def __init__(
        self,
        address: str,
        handler: Handler,
        *,
        num_envs: int,
        env_batch_size: int,
        observation_spec: ObservationSpec,
        action_spec: ArraySpec,
        config_json: str,
        inference_batch_size: int,
        max_batch_wait_ms: float,
        wait_for_full_batch: bool = False,
        auth_token: str = "",
        server_kind: str = "threads",
        aio_listeners: int = AIO_LISTENERS,
        max_workers: int | None = None,
        server_credentials: grpc.ServerCredentials | None = None,
        local_stream: bool = True,
        stream_idle_timeout_s: float = DEFAULT_STREAM_IDLE_TIMEOUT_S,
        grpc_options: Sequence[tuple[str, Any]] = (),
        max_abs_reward: float = DEFAULT_MAX_ABS_REWARD,
        max_abs_observation: float = DEFAULT_MAX_ABS_OBSERVATION,
        max_refused_in_a_row: int = DEFAULT_MAX_REFUSED_IN_A_ROW,
    ) -> None:
        if num_envs < 1 or env_batch_size < 1:
            raise ValueError(
                f"num_envs and env_batch_size must be >= 1, got {num_envs} and {env_batch_size}"
            )
        if env_batch_size > num_envs:
            raise ValueError(
                f"env_batch_size={env_batch_size} exceeds num_envs={num_envs}: no task would fit"
            )
        # Encoding the specs now refuses unsupported dtypes before anything listens.
        codec.encode_observation_spec(observation_spec)
        codec.encode_array_spec(action_spec)
        self._address = address
        self._handler = handler
        self._num_envs = int(num_envs)
        self._env_batch_size = int(env_batch_size)
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self._config_json = config_json
        self._inference_batch_size = int(inference_batch_size)
        self._max_batch_wait_ms = float(max_batch_wait_ms)
        self._wait_for_full_batch = bool(wait_for_full_batch)
        self._auth_token = auth_token
        if server_kind not in SERVER_KINDS:
            raise ValueError(f"server_kind must be one of {', '.join(SERVER_KINDS)}, got {server_kind!r}")
        self._server_kind = server_kind
        if aio_listeners < 1:
            raise ValueError(f"aio_listeners must be >= 1, got {aio_listeners}")
        self._aio_listeners = int(aio_listeners)
        num_tasks = self._num_envs // self._env_batch_size
        self._max_workers = max_workers or 2 * num_tasks + _HANDSHAKE_THREADS
        if self._max_workers <= _HANDSHAKE_THREADS:
            raise ValueError(
                f"max_workers={self._max_workers} leaves no thread for a stream: {_HANDSHAKE_THREADS} threads "
                f"are kept for handshakes, so give at least {_HANDSHAKE_THREADS + 1} (default: 2 per task + "
                f"{_HANDSHAKE_THREADS})"
            )
        self._stream_idle_timeout_s = float(stream_idle_timeout_s)
        self._max_abs_reward = float(max_abs_reward)
        self._max_abs_observation = float(max_abs_observation)
        if max_refused_in_a_row < 1:
            raise ValueError(f"max_refused_in_a_row must be >= 1, got {max_refused_in_a_row}")
        self._max_refused_in_a_row = int(max_refused_in_a_row)
        options = (*SERVER_OPTIONS,
                   ("grpc.http2.lookahead_bytes", receive_window_bytes(observation_spec, self._env_batch_size)))
        for name, value in grpc_options:
            options = _with_option(options, name, value)
        self._grpc_options: tuple[tuple[str, Any], ...] = options
        self._credentials = server_credentials
        self._local_stream = bool(local_stream)
        self._local: LocalStreamServer | None = None  # while serving
        self._server: grpc.Server | grpc.aio.Server | None = None
        self._more_servers: list[grpc.aio.Server] = []  # the "aio" kind's other listeners, while serving
        self._aio: AioLoop | None = None  # the event loop of the "aio" kind, while serving
        self._core: SessionCore | None = None
        self._servicer: _Servicer | AioServicer | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port once started (None before)."""
        return self._port

    def start(self) -> int:
        """Binds, starts serving and returns the bound port. A stopped server can be started again."""
        if self._server is not None:
            raise RuntimeError("the inference server is already started")
        batcher = DynamicBatcher(
            self._handler,
            self._inference_batch_size,
            self._max_batch_wait_ms,
            self._wait_for_full_batch,
        )
        core = SessionCore(
            batcher,
            num_envs=self._num_envs,
            env_batch_size=self._env_batch_size,
            observation_spec=self._observation_spec,
            action_spec=self._action_spec,
            config_json=self._config_json,
            auth_token=self._auth_token,
            stream_idle_timeout_s=self._stream_idle_timeout_s,
            max_abs_reward=self._max_abs_reward,
            max_abs_observation=self._max_abs_observation,
            max_refused_in_a_row=self._max_refused_in_a_row,
            # The thread pool has a thread per live stream; the event loop has no such limit (the per-task rule
            # of attach_stream bounds the streams to 2 per task).
            max_grpc_streams=self._max_workers - _HANDSHAKE_THREADS if self._server_kind == "threads" else None,
        )
        if self._local_stream and local_stream_supported():
            # Before gRPC serves, so that every handshake offers it.
            self._local = LocalStreamServer(core)
            core.set_local_stream_address(self._local.address)
        server: grpc.Server | grpc.aio.Server
        servicer: _Servicer | AioServicer
        try:
            if self._server_kind == "aio":
                aio = AioLoop()
                try:
                    server, servicer, port, self._more_servers = aio.run(self._start_aio(core))
                except BaseException:
                    aio.close()
                    raise
                self._aio = aio
            else:
                server, servicer, port = self._start_threads(core)
        except BaseException:
            batcher.stop()
            core.stop()
            if self._local is not None:
                self._local.stop()
                self._local = None
            raise
        self._server, self._core, self._servicer, self._port = server, core, servicer, port
        _log.info(
            "inference server (%s) listening on port %d%s",
            self._server_kind,
            port,
            f" and {self._local.address}" if self._local is not None else "",
        )
        return port

    def _bind(self, server: grpc.Server | grpc.aio.Server, address: str | None = None) -> int:
        address = address or self._address
        try:
            if self._credentials is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, self._credentials)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {address}: {e}") from e
        if port == 0:
            raise OSError(f"cannot listen on {address} (address in use or invalid)")
        return port

    def _start_threads(self, core: SessionCore) -> tuple[grpc.Server, _Servicer, int]:
        servicer = _Servicer(core)
        server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="seed_rl-grpc"
            ),
            options=self._grpc_options,
        )
        server.add_generic_rpc_handlers((learner_service(servicer),))
        port = self._bind(server)
        server.start()
        return server, servicer, port

    async def _start_aio(
        self, core: SessionCore
    ) -> tuple[grpc.aio.Server, AioServicer, int, list[grpc.aio.Server]]:
        """The grpc.aio servers: the first binds the address (a free port for port 0), the others the same port,
        all serving one servicer on this loop."""
        servicer = AioServicer(core)
        shared = self._aio_listeners > 1
        if shared:
            # SO_REUSEPORT lets every socket that sets it bind the port, also another learner's: refuse a port
            # that something listens on already (the reason SERVER_OPTIONS turns it off).
            refuse_busy_port(self._address)
        options = _with_option(self._grpc_options, "grpc.so_reuseport", int(shared))
        servers: list[grpc.aio.Server] = []
        try:
            for i in range(self._aio_listeners):
                server = grpc.aio.server(options=options)
                server.add_generic_rpc_handlers((learner_service(servicer),))
                servers.append(server)
                if i == 0:
                    port = self._bind(server)
                    host = self._address.rsplit(":", 1)[0]
                else:
                    self._bind(server, f"{host}:{port}")
                await server.start()
        except BaseException:
            for server in servers:
                await server.stop(None)
            raise
        return servers[0], servicer, port, servers[1:]

    @property
    def server_kind(self) -> str:
        return self._server_kind

    @property
    def local_stream_address(self) -> str:
        """The same-host stream's address offered in the handshake ("" when none is served)."""
        return self._local.address if self._local is not None else ""

    def stop(self, grace: float | None = None, finished: bool = False) -> None:
        """Stops serving. Calls waiting for actions, and every later call, fail with UNAVAILABLE ("learner is
        stopping"); a handler blocked on back-pressure is not waited for.

        Args:
          grace: seconds that in-flight calls get to finish before the remaining streams (actors between two
            steps) are cancelled. None: a short default (0.1 s), enough to deliver "learner is stopping".
          finished: training is over (not a restart): the refusals carry the reason ``finished``, which makes the
            actors exit, and the server keeps refusing for ``FINISHED_NOTICE_S`` first, so that the actors
            stepping their envs right now hear it with their next message instead of finding no learner.
        """
        server, core = self._server, self._core
        if server is None or core is None:
            return
        core.stop(finished=finished)
        core.batcher.stop(timeout=0.1)
        with (
            core.inflight_cond
        ):  # let the failed calls hand their status to gRPC before it cancels the rest
            core.inflight_cond.wait_for(lambda: core.inflight == 0, timeout=1.0)
        if finished:
            time.sleep(FINISHED_NOTICE_S)
        grace = _DEFAULT_GRACE_S if grace is None else grace
        if self._aio is not None:
            servers = [server, *self._more_servers]
            self._more_servers = []
            try:
                self._aio.run(_stop_all(servers, grace), timeout=grace + 5.0)  # type: ignore[arg-type]
            finally:
                self._aio.close()
                self._aio = None
        else:
            server.stop(grace).wait()  # type: ignore[union-attr]
        if self._local is not None:
            self._local.stop()
            self._local = None
        self._server = None

    def stats(self) -> dict[str, float]:
        """Batcher counters (see DynamicBatcher.stats; window counters reset) plus server totals."""
        core = self._core
        if core is None:
            return {}
        out: dict[str, float] = dict(core.batcher.stats())
        out["messages_total"] = core.counters["messages"]
        out["rejected_messages_total"] = core.counters["rejected_messages"]
        out["handshakes_total"] = core.counters["handshakes"]
        out["superseded_streams_total"] = core.counters["superseded_streams"]
        out["idle_streams_closed_total"] = core.counters["idle_streams"]
        out["refused_streams_total"] = core.counters["refused_streams"]
        out["refused_messages_total"] = core.counters["refused_messages"]
        out["refused_rows_total"] = core.counters["refused_rows"]
        out["refused_rows_streams_closed_total"] = core.counters["refused_rows_streams"]
        out["active_streams"] = (self._servicer.active_streams if self._servicer else 0) + (
            self._local.active_streams if self._local is not None else 0
        )
        return out

    def __enter__(self) -> Self:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _stop_all(servers: list, grace: float) -> None:
    await asyncio.gather(*(server.stop(grace) for server in servers))


def _with_option(options: tuple, name: str, value: object) -> tuple:
    return tuple(o for o in options if o[0] != name) + ((name, value),)


def refuse_busy_port(address: str) -> None:
    """Raises OSError when something listens on ``address``'s port already (a fixed port only; port 0 picks a
    free one). A probe socket binds the address without ``SO_REUSEPORT``, which fails while any socket listens on
    the port; names that do not resolve are left to gRPC's bind, which reports them."""
    host, _, port_text = address.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        return
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return
    for family, kind, proto, _, sockaddr in infos:
        try:
            probe = socket.socket(family, kind, proto)
        except OSError:  # e.g. no IPv6 on this host: gRPC's bind decides
            continue
        with probe:
            # As gRPC's own sockets: a port whose old connections linger in TIME_WAIT (a learner that restarts)
            # binds; one that a socket listens on does not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise OSError(
                        f"cannot listen on {address}: port {port} is in use (is another learner running there?)"
                    ) from None


MIN_PING_INTERVAL_ARG = "grpc.http2.min_ping_interval_without_data_ms"
"""The server argument: the shortest interval between two client pings (while the server sends nothing) that it
accepts without a strike; three strikes and it closes the connection with GOAWAY "too_many_pings"."""

FINISHED_NOTICE_S = 3.0
"""How long a learner whose training is finished keeps refusing with the reason ``finished`` before it stops."""

UNREQUESTED_CALL_WAIT_S = 600
"""How long (seconds) a call may wait for the server to take it up before gRPC cancels it (its default: 30)."""

SERVER_OPTIONS = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Without this, Linux lets a second learner bind the same port and silently share the actors.
    ("grpc.so_reuseport", 0),
    # Accept the clients' keepalive pings (every 30 s, also while they wait on a blocked inference or for their
    # handshake to be taken up); gRPC's default minimum of 5 minutes would answer them with GOAWAY
    # "too_many_pings". (The C name is GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS; its string has no
    # "recv", and gRPC ignores an argument name it does not know: until 2026-12-01 this said
    # "min_recv_ping_interval_without_data_ms", and 1,000 actors waiting for their handshakes got GOAWAYs.)
    (MIN_PING_INTERVAL_ARG, 10_000),
    # gRPC cancels a call that arrived but that the server has not taken up yet (no free worker thread, or the
    # event loop busy) after 30 s, and the actor sees a bare CANCELLED. When hundreds of actors connect at once
    # their handshakes and first streams queue that long; let them wait (the actor's own connect timeout
    # still bounds the wait). Measured with benchmarks/many_actors.py at 1,000 streams (docs/transport.md).
    ("grpc.server_max_unrequested_time_in_server", UNREQUESTED_CALL_WAIT_S),
    # No BDP probing: gRPC's bandwidth-delay estimator sends a PING on every connection from 100 ms to 10 s
    # apart to size its receive window, whatever the traffic; with 1,000 actors stepping a few times a second
    # each, that was about one PING and its ACK for every two round trips, each a write and a wake-up on both
    # sides. The learner instead announces a fixed window sized to its own messages (``receive_window_bytes``,
    # set per server as grpc.http2.lookahead_bytes), so a big message still crosses in one round trip
    # (docs/transport.md, "Flow control").
    ("grpc.http2.bdp_probe", 0),
)
"""The options of the learner's gRPC servers, either kind; each server adds its receive window
(``receive_window_bytes``) and the ``grpc_options`` it was given."""

RECEIVE_WINDOW_MIN_BYTES = 1 << 20
"""The smallest receive window the learner announces (1 MiB), however small its messages."""


def receive_window_bytes(observation_spec: ObservationSpec, env_batch_size: int) -> int:
    """The HTTP/2 receive window (per stream and per connection) the learner announces: room for two full
    messages of an actor (``env_batch_size`` envs; an actor with two env groups has both halves in flight), at
    least ``RECEIVE_WINDOW_MIN_BYTES`` and at most ``MAX_MESSAGE_BYTES``. An actor's message then crosses in
    one round trip however far away the actor is, as with gRPC's own window tuning, without its probing."""
    wanted = 2 * codec.step_batch_bytes(observation_spec, env_batch_size)
    return int(min(MAX_MESSAGE_BYTES, max(RECEIVE_WINDOW_MIN_BYTES, wanted)))


def tune_garbage_collector(threshold: int) -> bool:
    """Sets up the learner process's cyclic garbage collector for serving; False (and nothing done) for 0.

    Every message in flight holds a few dozen container objects (its protobuf, arrays, futures, the stream's
    coroutine frames), and the generational collector scans the survivors again in every older-generation
    collection, so its cost per message grows with the number of actors stepping at once (12% of the
    learner's round trips at 1,000 actors, docs/transport.md, "Garbage collection"). This collects once, freezes
    what is alive (``gc.freeze``: the model, the optimizer and the modules, built once and never garbage, leave
    the scans) and runs a young-generation collection every ``threshold`` new container objects instead of
    Python's 700, keeping the older generations' ratios. Reference counting still frees every object that is not
    in a cycle at once; cycles wait at most one young collection longer. Process-wide: the CLI calls it in the
    learner's process once the learner is built (``--gc_threshold``), again for each seed of ``--seeds``; a
    library user may call it likewise.
    """
    if threshold < 0:
        raise ValueError(f"gc threshold must be >= 0 (0: leave Python's collector as it is), got {threshold}")
    if threshold == 0:
        return False
    gc.unfreeze()  # an earlier call's frozen objects (an earlier learner in this process) may be garbage by now
    gc.collect()  # what is garbage now is collected, not frozen
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
    return True
