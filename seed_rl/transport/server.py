"""The learner's gRPC server: handshake, one bidirectional stream per actor, dynamic batching.

:class:`InferenceServer` implements the ``seed_rl.v1.Learner`` service (seed_rl/protos/seed_rl.proto):

* ``Handshake`` checks the protocol version and the auth token, gives the calling task its env ids
  ``[task * env_batch_size, (task + 1) * env_batch_size)`` and a fresh session id, and returns the specs and the
  config. A newer handshake for the same task supersedes the older session: later messages on the older session's
  stream fail with FAILED_PRECONDITION.
* ``Stream`` validates every message against the session's env ids and the learner's specs before it reaches the
  :class:`~seed_rl.transport.batcher.DynamicBatcher`, which calls the inference handler on batches of rows and
  hands each actor its actions. A bad message aborts only its own stream (INVALID_ARGUMENT); nothing of it
  reaches the handler.

Actors on the learner's host may send their ``Stream`` messages over a Unix socket instead
(seed_rl/transport/local.py, offered in the handshake); they go through the same ``_Core``.

Every error is a gRPC status whose details say what to do, plus a short reason in the trailing metadata key
``seed-rl-reason``; the table is in docs/transport.md. Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hmac
import logging
import queue
import secrets
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from seed_rl.protos import (
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    REASON_METADATA_KEY,
    SESSION_METADATA_KEY,
    TOKEN_METADATA_KEY,
    codec,
)
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.transport.batcher import DynamicBatcher, Handler
from seed_rl.transport.errors import LearnerUnavailableError, TransportError, status_code_of
from seed_rl.types import ArraySpec, EnvOutput, ObservationSpec, StepBatch

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["InferenceServer", "validate_step_batch"]

_log = logging.getLogger(__name__)

_STOPPING = "learner is stopping"
_MAX_READ_AHEAD = 16  # unanswered messages per stream before the server stops reading it
_END = object()
_DEFAULT_GRACE_S = 0.1

# Per-env scalar fields: (name in error messages, accepted dtype kinds, canonical dtype).
_SCALAR_FIELDS = (
    ("run_ids", "iu", np.dtype(np.int64)),
    ("reward", "f", np.dtype(np.float32)),
    ("done", "b", np.dtype(np.bool_)),
    ("abandoned", "b", np.dtype(np.bool_)),
    ("episode_step", "iu", np.dtype(np.int32)),
    ("raw_reward", "f", np.dtype(np.float32)),
)
_KIND_NAMES = {"iu": "an integer", "f": "a floating-point", "b": "a bool"}


class _Abort(Exception):
    """Ends the current RPC with ``code`` and ``details``; ``reason`` goes to the trailing metadata."""

    def __init__(self, code: grpc.StatusCode, details: str, reason: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.reason = reason


def _check_observation(observation: Any, spec: ObservationSpec, k: int) -> Any:
    what = "StepBatch.observation"
    if isinstance(spec, ArraySpec):
        if isinstance(observation, dict):
            raise ValueError(  # noqa: TRY004 - a ValueError refuses the message
                f"{what}: got a dict with keys {sorted(observation)}, the learner expects a plain array "
                f"of spec shape {tuple(spec.shape)} dtype {spec.dtype}"
            )
        leaves = {"": (observation, spec)}
    else:
        if not isinstance(observation, dict):
            raise ValueError(  # noqa: TRY004 - a ValueError refuses the message
                f"{what}: got a plain array, the learner expects a dict with keys {sorted(spec)}"
            )
        if observation.keys() != spec.keys():
            raise ValueError(
                f"{what}: keys {sorted(observation)} do not match the learner's spec keys {sorted(spec)}"
            )
        leaves = {key: (observation[key], spec[key]) for key in spec}
    for key, (array, leaf_spec) in leaves.items():
        name = f"{what}[{key!r}]" if key else what
        if array.ndim == 0 or array.shape[0] != k:
            raise ValueError(
                f"{name}: shape {array.shape} does not start with the message's {k} env rows"
            )
        leaf_spec.check(array, name)
    return observation


def validate_step_batch(
    step_batch: StepBatch,
    observation_spec: ObservationSpec,
    env_id_begin: int,
    env_id_end: int,
    num_envs: int,
) -> StepBatch:
    """Checks one decoded actor message and returns it with canonical dtypes for the per-env scalar fields.

    Checks: ``env_ids`` has shape ``[k]``, k >= 1, with unique ids inside ``[env_id_begin, env_id_end)``; every
    scalar field has shape ``[k]`` and the right kind of dtype (int for ids and steps, float for rewards, bool for
    done/abandoned); the observation has the spec's keys, dtype and shape, with k rows.

    Raises:
      ValueError: with a message that names the field, the expected and the actual value.
    """
    env_ids = step_batch.env_ids
    if env_ids.ndim != 1 or env_ids.shape[0] < 1:
        raise ValueError(f"StepBatch.env_ids: shape {env_ids.shape}; expected [k] with k >= 1 envs")
    if env_ids.dtype.kind not in "iu":
        raise ValueError(
            f"StepBatch.env_ids: dtype {env_ids.dtype} is not an integer dtype (expected int32)"
        )
    k = env_ids.shape[0]
    outputs = step_batch.env_outputs
    values = {
        "run_ids": step_batch.run_ids,
        "reward": outputs.reward,
        "done": outputs.done,
        "abandoned": outputs.abandoned,
        "episode_step": outputs.episode_step,
        "raw_reward": step_batch.raw_rewards,
    }
    cast = {}
    for name, kinds, canonical in _SCALAR_FIELDS:
        array = values[name]
        if array.shape != (k,):
            raise ValueError(
                f"StepBatch.{name}: shape {array.shape} does not match env_ids' shape ({k},)"
            )
        if array.dtype.kind not in kinds:
            raise ValueError(
                f"StepBatch.{name}: dtype {array.dtype} is not {_KIND_NAMES[kinds]} dtype (expected {canonical})"
            )
        cast[name] = array if array.dtype == canonical else array.astype(canonical)

    ids = env_ids.tolist()
    if len(set(ids)) != k:
        counts = collections.Counter(ids)
        duplicate = next(i for i in ids if counts[i] > 1)
        raise ValueError(
            f"StepBatch.env_ids: env id {duplicate} appears more than once in one message"
        )
    for env_id in ids:
        if not env_id_begin <= env_id < env_id_end:
            where = (
                "belongs to another task"
                if 0 <= env_id < num_envs
                else f"is outside [0, num_envs={num_envs})"
            )
            raise ValueError(
                f"StepBatch.env_ids: env id {env_id} {where}; this session owns env ids "
                f"[{env_id_begin}, {env_id_end})"
            )
    observation = _check_observation(outputs.observation, observation_spec, k)
    return StepBatch(
        env_ids=env_ids if env_ids.dtype == np.int32 else env_ids.astype(np.int32),
        run_ids=cast["run_ids"],
        env_outputs=EnvOutput(
            reward=cast["reward"],
            done=cast["done"],
            observation=observation,
            abandoned=cast["abandoned"],
            episode_step=cast["episode_step"],
        ),
        raw_rewards=cast["raw_reward"],
    )


class _Session:
    __slots__ = ("env_id_begin", "env_id_end", "session_id", "superseded", "task")

    def __init__(self, session_id: str, task: int, env_id_begin: int, env_id_end: int) -> None:
        self.session_id = session_id
        self.task = task
        self.env_id_begin = env_id_begin
        self.env_id_end = env_id_end
        self.superseded = False


class _Core:
    """What both servicer flavours share: sessions, validation, batching, counters."""

    def __init__(
        self,
        batcher: DynamicBatcher,
        *,
        num_envs: int,
        env_batch_size: int,
        observation_spec: ObservationSpec,
        action_spec: ArraySpec,
        config_json: str,
        auth_token: str,
    ) -> None:
        self.batcher = batcher
        self.num_envs = num_envs
        self.env_batch_size = env_batch_size
        self.num_tasks = num_envs // env_batch_size
        self.observation_spec = observation_spec
        self.auth_token = auth_token
        self.stopping = False
        self._lock = threading.Lock()
        self._by_task: dict[int, _Session] = {}
        self._by_id: dict[str, _Session] = {}  # insertion order: oldest first
        self._handshake_template = pb.HandshakeResponse(
            protocol_version=PROTOCOL_VERSION,
            num_envs=num_envs,
            config_json=config_json,
            observation_spec=codec.encode_observation_spec(observation_spec),
            action_spec=codec.encode_array_spec(action_spec),
        )
        self.counters: collections.Counter[str] = collections.Counter()
        # Messages queued and not yet answered; stop() lets their streams answer before cancelling.
        self.inflight = 0
        self.inflight_cond = threading.Condition()

    def set_local_stream_address(self, address: str) -> None:
        """Offers the same-host stream at ``address`` in every later handshake."""
        self._handshake_template.local_stream_address = address

    def add_inflight(self, n: int) -> None:
        with self.inflight_cond:
            self.inflight += n
            if self.inflight == 0:
                self.inflight_cond.notify_all()

    # --------------------------------------------------------------------------------------------- handshake

    def handshake(self, request: pb.HandshakeRequest) -> pb.HandshakeResponse:
        if self.stopping:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
        if request.protocol_version != PROTOCOL_VERSION:
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"protocol version mismatch: the actor speaks version {request.protocol_version}, the learner "
                f"speaks version {PROTOCOL_VERSION}; run the same seed_rl version on learner and actors",
                "protocol-version",
            )
        self._check_token(request.auth_token)
        task = request.task
        if not 0 <= task < self.num_tasks:
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"task {task} is out of range: the learner has num_envs={self.num_envs} and "
                f"env_batch_size={self.env_batch_size}, so valid tasks are 0..{self.num_tasks - 1}",
                "task-out-of-range",
            )
        begin, end = task * self.env_batch_size, (task + 1) * self.env_batch_size
        session = _Session(secrets.token_hex(16), task, begin, end)
        with self._lock:
            previous = self._by_task.get(task)
            if previous is not None:
                previous.superseded = True
                _log.info(
                    "task %d connected again: session %s superseded", task, previous.session_id[:8]
                )
            self._by_task[task] = session
            self._by_id[session.session_id] = session
            # Keep superseded sessions for a while (to say "superseded" rather than "unknown"), but bounded;
            # current sessions (at most one per task) are never dropped.
            excess = len(self._by_id) - (self.num_tasks + 256)
            if excess > 0:
                stale = [sid for sid, s in self._by_id.items() if s.superseded][:excess]
                for sid in stale:
                    del self._by_id[sid]
            self.counters["handshakes"] += 1
        response = pb.HandshakeResponse()
        response.CopyFrom(self._handshake_template)
        response.session_id = session.session_id
        response.env_id_begin = begin
        response.env_id_end = end
        return response

    def _check_token(self, token: str) -> None:
        if self.auth_token and not hmac.compare_digest(token.encode(), self.auth_token.encode()):
            raise _Abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or wrong auth token: start the actor with the learner's auth_token (--auth_token or "
                "$SEED_RL_AUTH_TOKEN)",
                "auth",
            )

    # ------------------------------------------------------------------------------------------------ stream

    def open_stream(self, metadata: Any) -> _Session:
        if self.stopping:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
        values = {key: value for key, value in (metadata or ())}
        self._check_token(values.get(TOKEN_METADATA_KEY, ""))
        session_id = values.get(SESSION_METADATA_KEY)
        if not session_id:
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the stream carries no '{SESSION_METADATA_KEY}' metadata: call Handshake first and pass the "
                "session_id it returns",
                "missing-session",
            )
        with self._lock:
            session = self._by_id.get(session_id)
        if session is None:
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"unknown session {session_id[:8]}...: the learner may have restarted; call Handshake first",
                "unknown-session",
            )
        self._check_current(session)
        return session

    @staticmethod
    def _check_current(session: _Session) -> None:
        if session.superseded:
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"session superseded: a newer Handshake for task {session.task} replaced this session (another "
                f"actor with task {session.task} connected); this actor must stop",
                "superseded",
            )

    def submit(self, session: _Session, message: pb.StepBatch) -> concurrent.futures.Future:
        """Validates one message and queues it; raises _Abort when it is refused."""
        if self.stopping:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
        try:
            step_batch = validate_step_batch(
                codec.decode_step_batch(message),
                self.observation_spec,
                session.env_id_begin,
                session.env_id_end,
                self.num_envs,
            )
        except ValueError as e:
            with self._lock:
                self.counters["rejected_messages"] += 1
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{e} (task {session.task})", "invalid-message"
            ) from None
        # The superseded check and the submit are atomic with respect to Handshake, so a superseded session can
        # never queue a message behind one of its successor's (that would reach the learner out of order).
        with self._lock:
            self._check_current(session)
            future = self.batcher.submit(step_batch)
            self.counters["messages"] += 1
        return future

    @staticmethod
    def abort_for(error: BaseException) -> _Abort:
        """The status for a failed inference future."""
        if isinstance(error, LearnerUnavailableError):
            return _Abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
        if isinstance(error, TransportError):
            return _Abort(status_code_of(error), str(error), "inference-failed")
        return _Abort(
            grpc.StatusCode.INTERNAL,
            f"the learner's inference step failed: {type(error).__name__}: {error}",
            "inference-failed",
        )

    @staticmethod
    def encode_actions(actions: np.ndarray) -> pb.ActionBatch:
        try:
            return pb.ActionBatch(actions=codec.encode_array(actions))
        except ValueError as e:
            raise _Abort(
                grpc.StatusCode.INTERNAL,
                f"the learner's actions cannot be sent: {e}",
                "inference-failed",
            ) from None


class _Servicer(pb_grpc.LearnerServicer):
    """The thread-pool servicer: each stream holds one worker thread for its lifetime."""

    def __init__(self, core: _Core) -> None:
        self._core = core
        self._active_lock = threading.Lock()
        self.active_streams = 0

    @staticmethod
    def _abort(context: grpc.ServicerContext, abort: _Abort) -> None:
        context.set_trailing_metadata(((REASON_METADATA_KEY, abort.reason),))
        context.abort(abort.code, abort.details)

    def Handshake(
        self, request: pb.HandshakeRequest, context: grpc.ServicerContext
    ) -> pb.HandshakeResponse:
        try:
            return self._core.handshake(request)
        except _Abort as abort:
            self._abort(context, abort)
            raise  # unreachable: context.abort raises

    def Stream(self, request_iterator: Iterator[pb.StepBatch], context: grpc.ServicerContext):
        """Answers the stream's messages in the order they came, with several of them in flight.

        A reader thread takes messages off the stream as they arrive and queues them with the batcher at once;
        this thread answers them in order. So an actor may send the next message (e.g. for another group of its
        envs) before the previous answer came back, which is what lets it step some envs while others wait for
        inference. The read-ahead is bounded (``_MAX_READ_AHEAD`` messages): beyond it the actor's sends wait
        in gRPC's flow control.
        """
        core = self._core
        lock = threading.Lock()
        outstanding: collections.deque[concurrent.futures.Future] = collections.deque()
        results: queue.SimpleQueue = queue.SimpleQueue()  # futures in arrival order, then _END or an _Abort
        room = threading.Semaphore(_MAX_READ_AHEAD)
        closed = [False]

        def close() -> None:
            """Withdraws every unanswered request (the actor is gone or the stream failed); idempotent."""
            with lock:
                if closed[0]:
                    return
                closed[0] = True
                doomed = list(outstanding)
                outstanding.clear()
            for future in doomed:
                future.cancel()
            if doomed:
                core.add_inflight(-len(doomed))
            room.release()  # a reader waiting for room wakes, sees `closed` and ends

        def read(session: _Session) -> None:
            try:
                for message in request_iterator:
                    room.acquire()
                    if closed[0]:
                        return
                    future = core.submit(session, message)  # raises _Abort for a refused message
                    with lock:
                        if closed[0]:
                            future.cancel()
                            return
                        outstanding.append(future)
                        core.add_inflight(1)
                    results.put(future)
                results.put(_END)
            except _Abort as abort:
                results.put(abort)
            except Exception:  # noqa: BLE001 - the RPC ended (cancelled, client gone): nothing to answer
                results.put(_END)

        with self._active_lock:
            self.active_streams += 1
        try:
            session = core.open_stream(context.invocation_metadata())
            context.add_callback(close)
            threading.Thread(target=read, args=(session,), name="seed_rl-stream-reader", daemon=True).start()
            while True:
                item = results.get()
                if item is _END:
                    return
                if isinstance(item, _Abort):
                    raise item
                try:
                    actions = item.result()
                except concurrent.futures.CancelledError:
                    return  # the actor is gone; nobody to answer
                except BaseException as e:  # noqa: BLE001 - reported to the actor as a status
                    raise core.abort_for(e) from None
                finally:
                    with lock:
                        answered = not closed[0]
                        if answered:
                            outstanding.popleft()
                    if answered:
                        core.add_inflight(-1)
                        room.release()
                yield core.encode_actions(actions)
        except _Abort as abort:
            self._abort(context, abort)
        finally:
            close()
            with self._active_lock:
                self.active_streams -= 1


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
      max_workers: worker threads; each live stream holds one. Default: 2 per task + 8 (room for replacement
        actors whose predecessors' streams are still open, and for handshakes).
      server_credentials: ``grpc.ssl_server_credentials(...)`` to serve TLS; None serves plaintext.
      local_stream: also serve the same-host stream (a Unix socket, seed_rl/transport/local.py) and offer it in
        the handshake; actors on this host then skip gRPC's per-message cost. Linux only (ignored elsewhere).
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
        max_workers: int | None = None,
        server_credentials: grpc.ServerCredentials | None = None,
        local_stream: bool = True,
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
        num_tasks = self._num_envs // self._env_batch_size
        self._max_workers = max_workers or 2 * num_tasks + 8
        self._credentials = server_credentials
        self._local_stream = bool(local_stream)
        self._local: Any = None  # the LocalStreamServer while serving
        self._server: grpc.Server | None = None
        self._core: _Core | None = None
        self._servicer: _Servicer | None = None
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
        core = _Core(
            batcher,
            num_envs=self._num_envs,
            env_batch_size=self._env_batch_size,
            observation_spec=self._observation_spec,
            action_spec=self._action_spec,
            config_json=self._config_json,
            auth_token=self._auth_token,
        )
        servicer = _Servicer(core)
        server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="seed_rl-grpc"
            ),
            options=_SERVER_OPTIONS,
        )
        pb_grpc.add_LearnerServicer_to_server(servicer, server)
        try:
            if self._credentials is None:
                port = server.add_insecure_port(self._address)
            else:
                port = server.add_secure_port(self._address, self._credentials)
        except RuntimeError as e:
            batcher.stop()
            raise OSError(f"cannot listen on {self._address}: {e}") from e
        if port == 0:
            batcher.stop()
            raise OSError(f"cannot listen on {self._address} (address in use or invalid)")
        if self._local_stream:
            from seed_rl.transport import local  # imports this module

            if local.local_stream_supported():
                self._local = local.LocalStreamServer(core)
                core.set_local_stream_address(self._local.address)
        server.start()
        self._server, self._core, self._servicer, self._port = server, core, servicer, port
        _log.info(
            "inference server listening on port %d%s",
            port,
            f" and {self._local.address}" if self._local is not None else "",
        )
        return port

    @property
    def local_stream_address(self) -> str:
        """The same-host stream's address offered in the handshake ("" when none is served)."""
        return self._local.address if self._local is not None else ""

    def stop(self, grace: float | None = None) -> None:
        """Stops serving. Calls waiting for actions, and every later call, fail with UNAVAILABLE ("learner is
        stopping"); a handler blocked on back-pressure is not waited for.

        Args:
          grace: seconds that in-flight calls get to finish before the remaining streams (actors between two
            steps) are cancelled. None: a short default (0.1 s), enough to deliver "learner is stopping".
        """
        server, core = self._server, self._core
        if server is None or core is None:
            return
        core.stopping = True
        core.batcher.stop(timeout=0.1)
        with (
            core.inflight_cond
        ):  # let the failed calls hand their status to gRPC before it cancels the rest
            core.inflight_cond.wait_for(lambda: core.inflight == 0, timeout=1.0)
        server.stop(_DEFAULT_GRACE_S if grace is None else grace).wait()
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


_SERVER_OPTIONS = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Without this, Linux lets a second learner bind the same port and silently share the actors.
    ("grpc.so_reuseport", 0),
    # Accept the clients' keepalive pings (every 30 s, also while they wait on a blocked inference); gRPC's
    # default minimum of 5 minutes would answer them with GOAWAY "too_many_pings".
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
)
