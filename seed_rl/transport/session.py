"""The session core shared by both carriers of the actors' ``Stream``: the gRPC servicer and the same-host stream.

:class:`SessionCore` owns what does not depend on how a message travels: the handshake (protocol version, auth
token, a task's env ids, a fresh session id, superseding an older session of the same task), opening a stream on
a session and the rules on live streams (one per session, two per task, a cap on gRPC streams, an idle timeout;
:meth:`SessionCore.attach_stream`), validating every ``StepBatch`` (:func:`validate_step_batch`, which also
refuses non-finite floats) before it is queued with the :class:`~seed_rl.transport.batcher.DynamicBatcher`, the
server's counters and the count of queued, unanswered messages that ``InferenceServer.stop`` waits for. Every
refusal is a :class:`Refusal`: the gRPC status code, the details and the ``seed-rl-reason`` that the carrier
reports to the actor (the gRPC servicers of seed_rl/transport/thread_server.py and aio_server.py as a gRPC
status, seed_rl/transport/local_server.py as a ``StreamStatus`` frame).

Learner side only: an actor never imports this module. Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np

from seed_rl.protos import PROTOCOL_VERSION, SESSION_METADATA_KEY, TOKEN_METADATA_KEY, codec
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.transport.batcher import DynamicBatcher, RefusedRows
from seed_rl.transport.errors import (
    FINISHED_REASON,
    REFUSED_ROWS_REASON,
    LearnerUnavailableError,
    TransportError,
    status_code_of,
)
from seed_rl.types import ArraySpec, EnvOutput, ObservationSpec, StepBatch

__all__ = [
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "MAX_READ_AHEAD",
    "Refusal",
    "Session",
    "SessionCore",
    "parse_message",
    "StreamHandle",
    "validate_step_batch",
]

_log = logging.getLogger(__name__)

MAX_READ_AHEAD = 16
"""Unanswered messages per stream (either carrier) before the learner stops reading that stream."""

DEFAULT_STREAM_IDLE_TIMEOUT_S = 300.0
"""A stream with nothing unanswered that receives no message for this long is closed (RunConfig's default)."""

DEFAULT_MAX_ABS_REWARD = 1e7
"""Rewards (and raw rewards) of larger magnitude are refused at the door (RunConfig's default)."""

DEFAULT_MAX_ABS_OBSERVATION = 1e6
"""Float observation values of larger magnitude are refused at the door (RunConfig's default)."""

DEFAULT_MAX_REFUSED_IN_A_ROW = 10
"""Answers in a row with refused rows before a stream is closed (RunConfig's default)."""

_STOPPING = "learner is stopping"
_FINISHED = "training is finished (the learner reached its frame budget or target return): the actor can exit"


# Per-env scalar fields: (name in error messages, accepted dtype kinds, canonical dtype).
_SCALAR_FIELDS = (
    ("run_ids", "iu", np.dtype(np.int64)),
    ("reward", "f", np.dtype(np.float32)),
    ("done", "b", np.dtype(np.bool_)),
    ("abandoned", "b", np.dtype(np.bool_)),
    ("episode_step", "iu", np.dtype(np.int32)),
    ("raw_reward", "f", np.dtype(np.float32)),
    ("life_lost", "b", np.dtype(np.bool_)),
)
_KIND_NAMES = {"iu": "an integer", "f": "a floating-point", "b": "a bool"}


class Refusal(Exception):
    """Why the learner refuses a call or a message: ends that stream (or handshake) with ``code`` and ``details``.

    ``reason`` is the short machine-readable cause (docs/transport.md, error table), sent as the trailing metadata
    ``seed-rl-reason`` on gRPC and as ``StreamStatus.reason`` on the same-host stream.
    """

    def __init__(self, code: grpc.StatusCode, details: str, reason: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.reason = reason


def _check_observation(
    observation: Any, spec: ObservationSpec, env_ids: np.ndarray, max_abs: float = 0.0
) -> Any:
    what = "StepBatch.observation"
    k = env_ids.shape[0]
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
        if array.dtype.kind == "f":
            _check_finite(array, name, env_ids)
            _check_magnitude(array, name, env_ids, max_abs, "max_abs_observation")
    return observation


def _check_magnitude(array: np.ndarray, what: str, env_ids: np.ndarray, bound: float, flag: str) -> None:
    """Refuses values of magnitude above ``bound`` (> 0; else nothing is checked) in a finite float field
    ``[k, ...]``, naming the env ids of the rows that hold them and the learner's flag.

    Finite but extreme values pass the finiteness check and then overflow in the network or the loss: a reward
    near float32's largest value makes the update of every actor's batch non-finite, an observation of 1e30 the
    network's output or a normalizer's running statistics (docs/transport.md, "Bad values").
    """
    if bound <= 0 or array.size == 0:
        return
    if max(float(array.max()), -float(array.min())) <= bound:
        return
    flat = np.abs(array.reshape(array.shape[0], -1))
    bad_rows = (flat > bound).any(axis=1)
    worst = float(flat[bad_rows].max())
    raise ValueError(
        f"{what}: magnitude up to {worst:.3g} for env ids {env_ids[bad_rows].tolist()}, above the learner's "
        f"{flag}={bound:g}; fix the env (or its reward scale), or raise --{flag}"
    )


def _check_finite(array: np.ndarray, what: str, env_ids: np.ndarray) -> None:
    """Refuses NaN and infinities in a float field ``[k, ...]``, naming the env ids of the rows that hold them.

    One bad reward is enough to poison the policy (a few steps later it samples actions that do not exist and
    the training thread dies), so it must never reach the learner. The common case costs one ``isfinite`` pass;
    the env ids are found only for a message that is refused.
    """
    if np.isfinite(array).all():
        return
    bad_rows = ~np.isfinite(array.reshape(array.shape[0], -1)).all(axis=1)
    bad_ids = env_ids[bad_rows].tolist()
    values = sorted({str(v) for v in array[bad_rows].ravel().tolist() if not np.isfinite(v)})
    raise ValueError(
        f"{what}: non-finite values ({', '.join(values)}) for env ids {bad_ids}; every float the learner "
        "receives must be finite"
    )


def validate_step_batch(
    step_batch: StepBatch,
    observation_spec: ObservationSpec,
    env_id_begin: int,
    env_id_end: int,
    num_envs: int,
    max_abs_reward: float = 0.0,
    max_abs_observation: float = 0.0,
) -> StepBatch:
    """Checks one decoded actor message and returns it with canonical dtypes for the per-env scalar fields.

    Checks: ``env_ids`` has shape ``[k]``, k >= 1, with unique ids inside ``[env_id_begin, env_id_end)``; every
    scalar field has shape ``[k]`` and the right kind of dtype (int for ids and steps, float for rewards, bool for
    done/abandoned/life_lost; an absent ``life_lost`` becomes all false); the observation has the spec's keys,
    dtype and shape, with k rows; every float (the rewards after their cast to float32, float observation leaves)
    is finite; with ``max_abs_reward`` > 0 no reward or raw
    reward has a larger magnitude, and with ``max_abs_observation`` > 0 no value of a float observation leaf.

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
        # absent (an actor that never loses lives, or one older than the field): no row lost a life
        "life_lost": np.zeros(k, np.bool_) if step_batch.life_lost is None else np.asarray(step_batch.life_lost),
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
        if array.dtype == canonical:
            cast[name] = array
        else:
            with np.errstate(over="ignore"):  # a float too big for float32 becomes inf, refused just below
                cast[name] = array.astype(canonical)
        if kinds == "f":
            _check_finite(cast[name], f"StepBatch.{name}", env_ids)
            _check_magnitude(cast[name], f"StepBatch.{name}", env_ids, max_abs_reward, "max_abs_reward")

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
    observation = _check_observation(outputs.observation, observation_spec, env_ids, max_abs_observation)
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
        life_lost=cast["life_lost"],
    )


def parse_message(message_type: Any, data: bytes) -> Any:
    """``data`` parsed as a ``message_type`` (``pb.StepBatch``, ``pb.HandshakeRequest``); every carrier parses the
    actors' bytes itself (the gRPC servers register raw-bytes handlers), so bytes that are not such a message get
    the same answer everywhere.

    Raises:
      Refusal: INVALID_ARGUMENT ``invalid-message`` naming the message type.
    """
    try:
        return message_type.FromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise Refusal(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{message_type.DESCRIPTOR.name}: not a valid serialized message ({e})",
            "invalid-message",
        ) from None


class Session:
    """One handshake's session: its task, the env ids it owns, whether a newer handshake superseded it, and its
    live stream (at most one, see :meth:`SessionCore.attach_stream`)."""

    __slots__ = ("env_id_begin", "env_id_end", "session_id", "stream", "superseded", "task")

    def __init__(self, session_id: str, task: int, env_id_begin: int, env_id_end: int) -> None:
        self.session_id = session_id
        self.task = task
        self.env_id_begin = env_id_begin
        self.env_id_end = env_id_end
        self.superseded = False
        self.stream: StreamHandle | None = None


class StreamHandle:
    """One live stream of a session, on either carrier, as the :class:`SessionCore` sees it.

    The carrier passes two callables to :meth:`SessionCore.attach_stream`: ``end(refusal)`` closes the stream
    with that status (called from another thread: a newer stream of the session, or the idle watchdog; it must
    not block), and ``busy()`` says whether messages of the stream are unanswered (a stream waiting for its
    actions is never idle). The carrier calls :meth:`touch` when a message arrives and when an answer leaves,
    and :meth:`SessionCore.detach_stream` when the stream ends.
    """

    __slots__ = ("busy", "carrier", "end", "ended", "last_active", "refused_in_a_row", "session")

    def __init__(
        self,
        session: Session,
        carrier: str,
        end: Callable[[Refusal], None],
        busy: Callable[[], bool],
    ) -> None:
        self.session = session
        self.carrier = carrier
        self.end = end
        self.busy = busy
        self.ended: Refusal | None = None  # why the core ended it (set under the core's lock)
        self.last_active = time.monotonic()
        self.refused_in_a_row = 0  # answers in a row with refused rows (SessionCore.answer)

    def touch(self) -> None:
        """Records activity (a message arrived or an answer left): restarts the idle clock."""
        self.last_active = time.monotonic()


class SessionCore:
    """What both carriers of the ``Stream`` share: sessions, validation, batching, counters.

    One per started :class:`~seed_rl.transport.server.InferenceServer`; the gRPC servicer and the same-host
    stream's connections call it from their threads. It owns the handshake and the sessions, refuses with a
    :class:`Refusal`, validates and queues messages with ``batcher``, and counts them (``counters``, and
    ``inflight``: queued messages not yet answered, which each carrier maintains with :meth:`add_inflight`).

    It also keeps the rules on live streams (:meth:`attach_stream`): one per session (a newer one supersedes
    it), at most two per task (the current session's and one of a session it superseded), at most
    ``max_grpc_streams`` on gRPC (each holds a worker thread of the server's pool), and none that stays idle
    for ``stream_idle_timeout_s`` (a watchdog thread closes it; 0 or less: never).
    """

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
        stream_idle_timeout_s: float = DEFAULT_STREAM_IDLE_TIMEOUT_S,
        max_grpc_streams: int | None = None,
        max_abs_reward: float = DEFAULT_MAX_ABS_REWARD,
        max_abs_observation: float = DEFAULT_MAX_ABS_OBSERVATION,
        max_refused_in_a_row: int = DEFAULT_MAX_REFUSED_IN_A_ROW,
    ) -> None:
        self.batcher = batcher
        self.num_envs = num_envs
        self.env_batch_size = env_batch_size
        self.num_tasks = num_envs // env_batch_size
        self.observation_spec = observation_spec
        self.auth_token = auth_token
        self.max_abs_reward = float(max_abs_reward)
        self.max_abs_observation = float(max_abs_observation)
        self.max_refused_in_a_row = int(max_refused_in_a_row)
        self.stopping = False
        self.finished = False  # stopping because training is finished: the refusals say so and actors exit
        self._lock = threading.Lock()
        self._by_task: dict[int, Session] = {}
        self._by_id: dict[str, Session] = {}  # insertion order: oldest first
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
        self.stream_idle_timeout_s = float(stream_idle_timeout_s)
        self.max_grpc_streams = max_grpc_streams
        self._streams: dict[StreamHandle, None] = {}  # live streams, oldest first (an ordered set)
        self._task_streams: dict[int, dict[StreamHandle, None]] = {}  # the same, by task (attach is O(1) in N)
        self._grpc_streams = 0
        self._stopped = threading.Event()
        self._watchdog: threading.Thread | None = None

    def stop(self, finished: bool = False) -> None:
        """Refuses every later call and message (UNAVAILABLE "learner is stopping", or with ``finished`` the
        reason ``finished``: training is over and the actors can exit); ends the idle watchdog."""
        self.finished = self.finished or finished
        self.stopping = True
        self._stopped.set()

    def set_local_stream_address(self, address: str) -> None:
        """Offers the same-host stream at ``address`` in every later handshake."""
        self._handshake_template.local_stream_address = address

    @property
    def local_stream_address(self) -> str:
        """The same-host stream's address that handshakes offer ("" when none)."""
        return self._handshake_template.local_stream_address

    def add_inflight(self, n: int) -> None:
        """Adds ``n`` (negative: answered or withdrawn) to the queued, unanswered messages; wakes stop() at 0."""
        with self.inflight_cond:
            self.inflight += n
            if self.inflight == 0:
                self.inflight_cond.notify_all()

    def withdraw(self, futures: list[concurrent.futures.Future]) -> None:
        """Cancels queued messages whose stream is gone (the batcher skips cancelled requests) and takes them off
        the in-flight count; both carriers' streams call it when they close."""
        for future in futures:
            future.cancel()
        if futures:
            self.add_inflight(-len(futures))

    # --------------------------------------------------------------------------------------------- handshake

    def handshake(self, request: pb.HandshakeRequest) -> pb.HandshakeResponse:
        """Opens a new session for ``request.task`` (superseding that task's older one) and returns its answer.

        Raises:
          Refusal: the learner is stopping, the protocol version or the token is wrong, or the task is out of range.
        """
        if self.stopping:
            raise self._stopping()
        if request.protocol_version != PROTOCOL_VERSION:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"protocol version mismatch: the actor speaks version {request.protocol_version}, the learner "
                f"speaks version {PROTOCOL_VERSION}; run the same seed_rl version on learner and actors",
                "protocol-version",
            )
        self._check_token(request.auth_token)
        task = request.task
        if not 0 <= task < self.num_tasks:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"task {task} is out of range: the learner has num_envs={self.num_envs} and "
                f"env_batch_size={self.env_batch_size}, so valid tasks are 0..{self.num_tasks - 1}",
                "task-out-of-range",
            )
        begin, end = task * self.env_batch_size, (task + 1) * self.env_batch_size
        session = Session(secrets.token_hex(16), task, begin, end)
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
            raise Refusal(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or wrong auth token: start the actor with the learner's auth_token (--auth_token or "
                "$SEED_RL_AUTH_TOKEN)",
                "auth",
            )

    # ------------------------------------------------------------------------------------------------ stream

    def open_stream(self, metadata: Any) -> Session:
        """The session that a new stream belongs to, from its ``(key, value)`` metadata (session id, token).

        Raises:
          Refusal: the learner is stopping, the token is wrong, or the session is missing, unknown or superseded.
        """
        if self.stopping:
            raise self._stopping()
        values = {key: value for key, value in (metadata or ())}
        self._check_token(values.get(TOKEN_METADATA_KEY, ""))
        session_id = values.get(SESSION_METADATA_KEY)
        if not session_id:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the stream carries no '{SESSION_METADATA_KEY}' metadata: call Handshake first and pass the "
                "session_id it returns",
                "missing-session",
            )
        with self._lock:
            session = self._by_id.get(session_id)
        if session is None:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"unknown session {session_id[:8]}...: the learner may have restarted; call Handshake first",
                "unknown-session",
            )
        self._check_current(session)
        return session

    @classmethod
    def _check_current(cls, session: Session) -> None:
        if session.superseded:
            raise cls._superseded(session)

    @staticmethod
    def _superseded(session: Session) -> Refusal:
        return Refusal(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"session superseded: a newer Handshake for task {session.task} replaced this session (another "
            f"actor with task {session.task} connected); this actor must stop",
            "superseded",
        )

    def attach_stream(
        self,
        session: Session,
        carrier: str,
        end: Callable[[Refusal], None],
        busy: Callable[[], bool],
    ) -> StreamHandle:
        """Registers a stream just opened on ``session`` (see :class:`StreamHandle` for ``end`` and ``busy``).

        The rules, which keep any number of streams from one client from starving the others:

        * A session has at most one live stream: this one supersedes the session's older stream, which is ended
          with FAILED_PRECONDITION ``stream-superseded`` (an actor that lost its stream opens a new one in the
          same session, and must not wait for the learner to notice that the old one is dead).
        * A task has at most two live streams: its current session's and one of the session that this session
          superseded (a replacement actor whose predecessor's stream is still open). Streams of older sessions
          are ended with FAILED_PRECONDITION ``superseded``.
        * At most ``max_grpc_streams`` gRPC streams are live: one more is refused at once with
          RESOURCE_EXHAUSTED ``too-many-streams`` (the server's other threads stay free for handshakes).

        Raises:
          Refusal: the learner is stopping, the session was superseded since it was looked up, or the gRPC
            stream limit is reached.
        """
        handle = StreamHandle(session, carrier, end, busy)
        victims: list[tuple[StreamHandle, Refusal]] = []
        with self._lock:
            if self.stopping:
                raise self._stopping()
            self._check_current(session)
            if session.stream is not None:
                victims.append((session.stream, self._stream_superseded(session)))
            # Every other session of the task is older (this one is current): keep the newest one's stream.
            older = [h for h in self._task_streams.get(session.task, ()) if h.session is not session]
            victims.extend((h, self._superseded(h.session)) for h in older[:-1])
            grpc_after = self._grpc_streams + (carrier == "grpc") - sum(h.carrier == "grpc" for h, _ in victims)
            if (
                carrier == "grpc"
                and self.max_grpc_streams is not None
                and grpc_after > self.max_grpc_streams
            ):
                self.counters["refused_streams"] += 1
                raise Refusal(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"too many streams: the learner serves at most {self.max_grpc_streams} gRPC streams at once "
                    f"(its other worker threads are kept for handshakes); task {session.task} may retry after a "
                    "back-off",
                    "too-many-streams",
                )
            for victim, refusal in victims:
                self._detach_locked(victim, refusal)
            self.counters["superseded_streams"] += len(victims)
            self._streams[handle] = None
            self._task_streams.setdefault(session.task, {})[handle] = None  # (the victims' detach may drop it)
            self._grpc_streams += carrier == "grpc"
            session.stream = handle
            if self._watchdog is None and self.stream_idle_timeout_s > 0:
                self._watchdog = threading.Thread(
                    target=self._watch_idle_streams, name="seed_rl-stream-watchdog", daemon=True
                )
                self._watchdog.start()
        for victim, _ in victims:
            self._end(victim)
        return handle

    def detach_stream(self, stream: StreamHandle) -> None:
        """Forgets a stream that ended (the carrier calls it once its stream is closed); idempotent."""
        with self._lock:
            self._detach_locked(stream, None)

    def _detach_locked(self, stream: StreamHandle, refusal: Refusal | None) -> None:
        if stream not in self._streams:
            return
        del self._streams[stream]
        task_streams = self._task_streams[stream.session.task]
        del task_streams[stream]
        if not task_streams:
            del self._task_streams[stream.session.task]
        self._grpc_streams -= stream.carrier == "grpc"
        if stream.session.stream is stream:
            stream.session.stream = None
        if refusal is not None and stream.ended is None:
            stream.ended = refusal

    def _watch_idle_streams(self) -> None:
        """Ends every stream that has nothing unanswered and has received nothing for the idle timeout."""
        timeout = self.stream_idle_timeout_s
        while not self._stopped.wait(min(1.0, timeout / 4)):
            now = time.monotonic()
            idle = []
            with self._lock:
                for stream in list(self._streams):
                    if now - stream.last_active >= timeout and not stream.busy():
                        self._detach_locked(stream, self._idle(timeout))
                        idle.append(stream)
                self.counters["idle_streams"] += len(idle)
            for stream in idle:
                self._end(stream)

    @staticmethod
    def _end(stream: StreamHandle) -> None:
        """Has the carrier close a stream that the core detached, with the status the core gave it."""
        refusal = stream.ended
        assert refusal is not None
        _log.info(
            "task %d: the learner closed a %s stream of session %s (%s)",
            stream.session.task,
            stream.carrier,
            stream.session.session_id[:8],
            refusal.reason,
        )
        try:
            stream.end(refusal)
        except Exception:  # a carrier's bug must not take the caller (a new stream, the watchdog) down
            _log.exception("closing a %s stream failed", stream.carrier)

    @staticmethod
    def _stream_superseded(session: Session) -> Refusal:
        return Refusal(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"stream superseded: a newer stream opened on this session (task {session.task}); a session has at "
            "most one live stream, so the learner closed this one",
            "stream-superseded",
        )

    @staticmethod
    def _idle(timeout: float) -> Refusal:
        return Refusal(
            grpc.StatusCode.UNAVAILABLE,
            f"stream closed as idle: nothing arrived on it for {timeout:g} s while no answer was due (the "
            "learner's stream_idle_timeout_s); open a new stream",
            "stream-idle",
        )

    def submit(
        self, session: Session, message: pb.StepBatch, stream: StreamHandle | None = None
    ) -> concurrent.futures.Future:
        """Validates one message of ``session`` (arriving on ``stream``, when the carrier attached one) and
        queues it; raises Refusal when it is refused, also when the core has ended ``stream``."""
        if stream is not None:
            stream.touch()
        if self.stopping:
            raise self._stopping()
        try:
            step_batch = validate_step_batch(
                codec.decode_step_batch(message),
                self.observation_spec,
                session.env_id_begin,
                session.env_id_end,
                self.num_envs,
                self.max_abs_reward,
                self.max_abs_observation,
            )
        except ValueError as e:
            with self._lock:
                self.counters["rejected_messages"] += 1
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT, f"{e} (task {session.task})", "invalid-message"
            ) from None
        # The superseded check and the submit are atomic with respect to Handshake, so a superseded session can
        # never queue a message behind one of its successor's (that would reach the learner out of order).
        with self._lock:
            self._check_current(session)
            if stream is not None and stream.ended is not None:
                raise stream.ended  # superseded by a newer stream, or idle: its later messages must not queue
            future = self.batcher.submit(step_batch)
            self.counters["messages"] += 1
        return future

    def _stopping(self) -> Refusal:
        if self.finished:
            return Refusal(grpc.StatusCode.UNAVAILABLE, _FINISHED, FINISHED_REASON)
        return Refusal(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")

    def abort_for(self, error: BaseException) -> Refusal:
        """The status for a failed inference future."""
        if isinstance(error, LearnerUnavailableError):
            return self._stopping()
        if isinstance(error, TransportError):
            return Refusal(status_code_of(error), str(error), "inference-failed")
        return Refusal(
            grpc.StatusCode.INTERNAL,
            f"the learner's inference step failed: {type(error).__name__}: {error}",
            "inference-failed",
        )

    def answer(self, stream: StreamHandle | None, result: np.ndarray | RefusedRows) -> pb.ActionBatch:
        """The answer to one message of ``stream`` from its batcher result: its actions, or, when the learner
        refused some of its rows (:class:`~seed_rl.transport.batcher.RefusedRows`), the actions with those env ids
        and why (the actor resets those envs and steps the others).

        Raises:
          Refusal: the actions cannot be encoded (INTERNAL), or this is the stream's ``max_refused_in_a_row``-th
            answer in a row with refused rows (INVALID_ARGUMENT ``refused-rows``: the stream ends).
        """
        refused: RefusedRows | None = result if isinstance(result, RefusedRows) else None
        if stream is not None:
            stream.refused_in_a_row = stream.refused_in_a_row + 1 if refused is not None else 0
        words = ""
        if refused is not None:
            with self._lock:
                self.counters["refused_messages"] += 1
                self.counters["refused_rows"] += len(refused.env_ids)
            words = f"the learner could not act on {refused.describe()}"
            if stream is not None and stream.refused_in_a_row >= self.max_refused_in_a_row:
                with self._lock:
                    self.counters["refused_rows_streams"] += 1
                raise Refusal(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{stream.refused_in_a_row} answers in a row had refused rows (the learner's "
                    f"max_refused_in_a_row), the last: {words}; check the env's observations (task "
                    f"{stream.session.task})",
                    REFUSED_ROWS_REASON,
                )
        actions = refused.actions if refused is not None else result
        try:
            message = pb.ActionBatch(actions=codec.encode_array(actions))
        except ValueError as e:
            raise Refusal(
                grpc.StatusCode.INTERNAL,
                f"the learner's actions cannot be sent: {e}",
                "inference-failed",
            ) from None
        if refused is not None:
            message.refused_env_ids.extend(refused.env_ids)
            message.refusal = words
        return message
