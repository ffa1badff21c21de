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
(seed_rl/transport/local_server.py, offered in the handshake). This module is the front that all carriers share:
the server's settings and life cycle, and :data:`CARRIERS`, the registry it starts them from (the gRPC server kind
it runs, "threads" in seed_rl/transport/thread_server.py or "aio" in seed_rl/transport/aio_server.py, and the
same-host socket). Each carrier is one module and one entry there; every carrier goes through the same
:class:`~seed_rl.transport.session.SessionCore` (seed_rl/transport/session.py: sessions, validation, batching) and
keeps each stream's read-ahead in a :class:`~seed_rl.transport.window.StreamWindow` (seed_rl/transport/window.py).

Every error is a gRPC status whose details say what to do, plus a short reason in the trailing metadata key
``seed-rl-reason``; the table is in docs/transport.md. Imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from seed_rl.protos import MAX_MESSAGE_BYTES, codec
from seed_rl.transport.aio_server import AIO_LISTENERS, start_aio_server
from seed_rl.transport.batcher import DynamicBatcher, Handler
from seed_rl.transport.grpc_serving import (
    ServerSettings,
    receive_window_bytes,
    with_option,
)
from seed_rl.transport.local import local_stream_supported
from seed_rl.transport.local_server import start_local_stream
from seed_rl.transport.session import (
    DEFAULT_MAX_ABS_OBSERVATION,
    DEFAULT_MAX_ABS_REWARD,
    DEFAULT_MAX_REFUSED_IN_A_ROW,
    DEFAULT_STREAM_IDLE_TIMEOUT_S,
    SessionCore,
    validate_step_batch,
)
from seed_rl.transport.thread_server import start_thread_server
from seed_rl.types import ArraySpec, ObservationSpec

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CARRIERS",
    "SERVER_KINDS",
    "SERVER_OPTIONS",
    "Carrier",
    "InferenceServer",
    "RunningCarrier",
    "validate_step_batch",
]

_log = logging.getLogger(__name__)

_DEFAULT_GRACE_S = 0.1
_HANDSHAKE_THREADS = 8  # worker threads that live streams may never take (see InferenceServer's max_workers)


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
      config_json: what the handshake returns to actors (the learner sends ``ActorConfig.of(config)``).
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
        num_tasks = self._num_envs // self._env_batch_size
        max_workers = max_workers or 2 * num_tasks + _HANDSHAKE_THREADS
        if max_workers <= _HANDSHAKE_THREADS:
            raise ValueError(
                f"max_workers={max_workers} leaves no thread for a stream: {_HANDSHAKE_THREADS} threads "
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
            options = with_option(options, name, value)
        self._settings = ServerSettings(
            address=address,
            credentials=server_credentials,
            grpc_options=options,
            max_workers=max_workers,
            aio_listeners=int(aio_listeners),
        )
        self._local_stream = bool(local_stream)
        self._running: dict[str, RunningCarrier] = {}  # while serving: the started CARRIERS, in start order
        self._core: SessionCore | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port once started (None before)."""
        return self._port

    def start(self) -> int:
        """Binds, starts serving and returns the bound port. A stopped server can be started again."""
        if self._running:
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
            max_grpc_streams=(
                self._settings.max_workers - _HANDSHAKE_THREADS if self._server_kind == "threads" else None
            ),
        )
        # The streams beside gRPC first, so that every handshake offers them; the gRPC server kind last.
        names = [name for name, carrier in CARRIERS.items()
                 if not carrier.serves_handshake and self._local_stream and carrier.supported()]
        running: dict[str, RunningCarrier] = {}
        try:
            for name in (*names, self._server_kind):
                running[name] = CARRIERS[name].start(self._settings, core)
        except BaseException:
            batcher.stop()
            core.stop()
            for started in reversed(running.values()):
                started.stop(0.0)
            raise
        port = running[self._server_kind].port
        assert port is not None
        self._running, self._core, self._port = running, core, port
        local = self.local_stream_address
        _log.info(
            "inference server (%s) listening on port %d%s",
            self._server_kind,
            port,
            f" and {local}" if local else "",
        )
        return port

    @property
    def server_kind(self) -> str:
        return self._server_kind

    @property
    def local_stream_address(self) -> str:
        """The same-host stream's address offered in the handshake ("" when none is served)."""
        return self._core.local_stream_address if self._running and self._core is not None else ""

    def stop(self, grace: float | None = None, finished: bool = False) -> None:
        """Stops serving. Calls waiting for actions, and every later call, fail with UNAVAILABLE ("learner is
        stopping"); a handler blocked on back-pressure is not waited for.

        Args:
          grace: seconds that in-flight calls get to finish before the remaining streams (actors between two
            steps) are cancelled. None: a short default (0.1 s), enough to deliver "learner is stopping".
          finished: training is over (not a restart): the refusals carry the reason ``finished``, which makes the
            actors exit, and the server keeps refusing until every open stream has heard it and closed (at least
            ``FINISHED_MIN_NOTICE_S``, at most ``FINISHED_NOTICE_S``), so that the actors stepping their envs
            right now hear it with their next message instead of finding no learner.
        """
        running, core = self._running, self._core
        if not running or core is None:
            return
        core.stop(finished=finished)
        core.batcher.stop(timeout=0.1)
        with (
            core.inflight_cond
        ):  # let the failed calls hand their status to gRPC before it cancels the rest
            core.inflight_cond.wait_for(lambda: core.inflight == 0, timeout=1.0)
        if finished:
            # Each open stream hears "finished" with its next message and then closes: the notice ends when none
            # is left (but not before FINISHED_MIN_NOTICE_S, for an actor that is reconnecting right now), or after
            # FINISHED_NOTICE_S (a stream whose actor is gone, or slow to step its envs).
            start = time.monotonic()
            while (elapsed := time.monotonic() - start) < FINISHED_NOTICE_S and (
                    elapsed < FINISHED_MIN_NOTICE_S or any(carrier.active_streams for carrier in running.values())):
                time.sleep(_NOTICE_POLL_S)
        grace = _DEFAULT_GRACE_S if grace is None else grace
        for name in reversed(list(running)):  # the gRPC server kind first, as it was started last
            running.pop(name).stop(grace)

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
        out["active_streams"] = sum(carrier.active_streams for carrier in self._running.values())
        return out

    def __enter__(self) -> Self:
        if not self._running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RunningCarrier(Protocol):
    """A carrier that the server started (what ``Carrier.start`` returns)."""

    @property
    def port(self) -> int | None:
        """The TCP port it listens on; None for one that listens elsewhere (the same-host socket)."""

    @property
    def active_streams(self) -> int:
        """Its live streams (``InferenceServer.stats``)."""

    def stop(self, grace: float) -> None:
        """Stops serving; its calls in flight get ``grace`` seconds to finish."""


@dataclasses.dataclass(frozen=True)
class Carrier:
    """How the learner serves the actors' ``Stream`` over one carrier: an entry of :data:`CARRIERS`."""

    start: Callable[[ServerSettings, SessionCore], RunningCarrier]
    """Starts serving the session core with the server's settings (``InferenceServer.start`` calls it); the
    carrier's module defines it."""
    reached_as: str
    """``LearnerClient.carrier`` of an actor that streams over it ("grpc", "local")."""
    serves_handshake: bool
    """True: a gRPC server kind (``server_kind`` picks one), which serves the handshake too. False: a stream beside
    it that the handshake offers, started with ``local_stream`` where ``supported()``."""
    supported: Callable[[], bool] = lambda: True


CARRIERS: dict[str, Carrier] = {
    # gRPC server kinds: a worker thread and a reader thread per live stream, or grpc.aio (every stream a
    # coroutine on one event loop thread; docs/transport.md, "Server concurrency").
    "threads": Carrier(start_thread_server, reached_as="grpc", serves_handshake=True),  # thread_server.py
    "aio": Carrier(start_aio_server, reached_as="grpc", serves_handshake=True),  # aio_server.py
    # The same-host Unix socket (seed_rl/transport/local_server.py).
    "local": Carrier(start_local_stream, reached_as="local", serves_handshake=False,
                     supported=local_stream_supported),
}
"""The carriers of the actors' ``Stream``, by name: a new carrier is its module and one entry here
(docs/architecture.md, "How to add a carrier"). tests/transport/test_contract.py runs its suite on every entry."""

SERVER_KINDS = tuple(name for name, carrier in CARRIERS.items() if carrier.serves_handshake)
"""How the gRPC server runs its streams: "threads" (a worker thread and a reader thread per live stream) or "aio"
(grpc.aio: every stream a coroutine on one event loop thread)."""

MIN_PING_INTERVAL_ARG = "grpc.http2.min_ping_interval_without_data_ms"
"""The server argument: the shortest interval between two client pings (while the server sends nothing) that it
accepts without a strike; three strikes and it closes the connection with GOAWAY "too_many_pings"."""

FINISHED_NOTICE_S = 3.0
"""The longest a learner whose training is finished keeps refusing with the reason ``finished`` before it stops
(it stops sooner once every open stream has heard it and closed)."""

FINISHED_MIN_NOTICE_S = 0.5
"""The shortest notice: an actor between two connection attempts (its back-off starts at 0.1 s) hears it too."""

_NOTICE_POLL_S = 0.02

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
    # sides. The learner instead announces a fixed window sized to its own messages
    # (``grpc_serving.receive_window_bytes``, set per server as grpc.http2.lookahead_bytes), so a big message still crosses in one round trip
    # (docs/transport.md, "Flow control").
    ("grpc.http2.bdp_probe", 0),
)
"""The options of the learner's gRPC servers, either kind; each server adds its receive window
(``grpc_serving.receive_window_bytes``) and the ``grpc_options`` it was given."""
