"""The session core shared by both carriers of the actors' ``Stream``: the gRPC servicer and the same-host stream.

:class:`SessionCore` owns what does not depend on how a message travels: the handshake (protocol version, auth
token, a task's env ids, a fresh session id, superseding an older session of the same task), opening a stream on
a session, validating every ``StepBatch`` (:func:`validate_step_batch`) before it is queued with the
:class:`~seed_rl.transport.batcher.DynamicBatcher`, the server's counters and the count of queued, unanswered
messages that ``InferenceServer.stop`` waits for. Every refusal is a :class:`Refusal`: the gRPC status code,
the details and the ``seed-rl-reason`` that the carrier reports to the actor (seed_rl/transport/server.py as a
gRPC status, seed_rl/transport/local_server.py as a ``StreamStatus`` frame).

Learner side only: an actor never imports this module. Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hmac
import logging
import secrets
import threading
from typing import Any

import grpc
import numpy as np

from seed_rl.protos import PROTOCOL_VERSION, SESSION_METADATA_KEY, TOKEN_METADATA_KEY, codec
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.transport.batcher import DynamicBatcher
from seed_rl.transport.errors import LearnerUnavailableError, TransportError, status_code_of
from seed_rl.types import ArraySpec, EnvOutput, ObservationSpec, StepBatch

__all__ = ["MAX_READ_AHEAD", "Refusal", "Session", "SessionCore", "validate_step_batch"]

_log = logging.getLogger(__name__)

MAX_READ_AHEAD = 16
"""Unanswered messages per stream (either carrier) before the learner stops reading that stream."""

_STOPPING = "learner is stopping"

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


class Session:
    """One handshake's session: its task, the env ids it owns, and whether a newer handshake superseded it."""

    __slots__ = ("env_id_begin", "env_id_end", "session_id", "superseded", "task")

    def __init__(self, session_id: str, task: int, env_id_begin: int, env_id_end: int) -> None:
        self.session_id = session_id
        self.task = task
        self.env_id_begin = env_id_begin
        self.env_id_end = env_id_end
        self.superseded = False


class SessionCore:
    """What both carriers of the ``Stream`` share: sessions, validation, batching, counters.

    One per started :class:`~seed_rl.transport.server.InferenceServer`; the gRPC servicer and the same-host
    stream's connections call it from their threads. It owns the handshake and the sessions, refuses with a
    :class:`Refusal`, validates and queues messages with ``batcher``, and counts them (``counters``, and
    ``inflight``: queued messages not yet answered, which each carrier maintains with :meth:`add_inflight`).
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
    ) -> None:
        self.batcher = batcher
        self.num_envs = num_envs
        self.env_batch_size = env_batch_size
        self.num_tasks = num_envs // env_batch_size
        self.observation_spec = observation_spec
        self.auth_token = auth_token
        self.stopping = False
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

    def set_local_stream_address(self, address: str) -> None:
        """Offers the same-host stream at ``address`` in every later handshake."""
        self._handshake_template.local_stream_address = address

    def add_inflight(self, n: int) -> None:
        """Adds ``n`` (negative: answered or withdrawn) to the queued, unanswered messages; wakes stop() at 0."""
        with self.inflight_cond:
            self.inflight += n
            if self.inflight == 0:
                self.inflight_cond.notify_all()

    # --------------------------------------------------------------------------------------------- handshake

    def handshake(self, request: pb.HandshakeRequest) -> pb.HandshakeResponse:
        """Opens a new session for ``request.task`` (superseding that task's older one) and returns its answer.

        Raises:
          Refusal: the learner is stopping, the protocol version or the token is wrong, or the task is out of range.
        """
        if self.stopping:
            raise Refusal(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
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
            raise Refusal(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
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

    @staticmethod
    def _check_current(session: Session) -> None:
        if session.superseded:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"session superseded: a newer Handshake for task {session.task} replaced this session (another "
                f"actor with task {session.task} connected); this actor must stop",
                "superseded",
            )

    def submit(self, session: Session, message: pb.StepBatch) -> concurrent.futures.Future:
        """Validates one message and queues it; raises Refusal when it is refused."""
        if self.stopping:
            raise Refusal(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
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
            raise Refusal(
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
    def abort_for(error: BaseException) -> Refusal:
        """The status for a failed inference future."""
        if isinstance(error, LearnerUnavailableError):
            return Refusal(grpc.StatusCode.UNAVAILABLE, _STOPPING, "stopping")
        if isinstance(error, TransportError):
            return Refusal(status_code_of(error), str(error), "inference-failed")
        return Refusal(
            grpc.StatusCode.INTERNAL,
            f"the learner's inference step failed: {type(error).__name__}: {error}",
            "inference-failed",
        )

    @staticmethod
    def encode_actions(actions: np.ndarray) -> pb.ActionBatch:
        """The answer to one message; raises a Refusal (INTERNAL) when the actions cannot be encoded."""
        try:
            return pb.ActionBatch(actions=codec.encode_array(actions))
        except ValueError as e:
            raise Refusal(
                grpc.StatusCode.INTERNAL,
                f"the learner's actions cannot be sent: {e}",
                "inference-failed",
            ) from None
