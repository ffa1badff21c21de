"""The actor side of the transport: one handshake, then one long-lived bidirectional stream.

``LearnerClient`` is all an actor needs to talk to the learner::

    with LearnerClient("127.0.0.1:8686", task=3) as client:
        info = client.handshake()               # waits for the learner, with back-off
        while True:
            actions = client.step(step_batch)   # one message up, one down

When the learner offers a same-host stream (seed_rl/transport/local.py) and this process can reach it, the steps go
over that Unix socket; otherwise over the gRPC stream. Every failure, on either, surfaces as a
:class:`~seed_rl.transport.errors.TransportError` subclass carrying the learner's message. The reconnection policy
belongs to the actor: on :class:`LearnerUnavailableError` it recreates its environments, draws new run ids and
connects again (a new client, or :meth:`LearnerClient.reconnect`). Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple, Protocol

import grpc
import numpy as np

from seed_rl.protos import (
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    SESSION_METADATA_KEY,
    TOKEN_METADATA_KEY,
    codec,
)
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.transport import tls
from seed_rl.transport.errors import (
    LearnerUnavailableError,
    ProtocolMismatchError,
    RowsRefusedError,
    TransportError,
    from_rpc_error,
)
from seed_rl.transport.local import LocalStream
from seed_rl.types import ArraySpec, ObservationSpec, StepBatch

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ACTOR_CARRIERS", "CHANNEL_OPTIONS", "ActorStream", "HandshakeInfo", "LearnerClient", "StreamRequest"]

_log = logging.getLogger(__name__)

CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # gRPC's own reconnect back-off starts at 1 s and grows to 120 s: far too slow to notice a learner that
    # (re)starts. Connection attempts keep gRPC's default 20 s connect timeout.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    # Detect a learner host that vanished without closing the connection, also while a step waits on a blocked
    # inference (the server accepts these pings, see server.py).
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # No BDP probing: it sizes this side's receive window, and an actor receives only its actions (a few bytes
    # per env, far below gRPC's 64 KiB initial window). Its PINGs (one per connection from 100 ms to 10 s apart,
    # whatever the traffic) would cost the actor and the learner a write and a wake-up each; at 1,000 actors
    # each side sent about one for every two round trips early in a run (the learner turns its own off too,
    # server.SERVER_OPTIONS).
    ("grpc.http2.bdp_probe", 0),
)
"""The options of every actor channel (message limits, reconnect back-off, keepalive); ``channel_options`` add to them."""

_INITIAL_RETRY_DELAY_S = 0.05
_MAX_RETRY_DELAY_S = 2.0
_WAIT_WARNING_PERIOD_S = 60.0  # a handshake that waits this long says so (and why it may never succeed)


class HandshakeInfo(NamedTuple):
    """What the learner told this actor in the handshake."""

    protocol_version: int
    """The learner's protocol version (equal to seed_rl.protos.PROTOCOL_VERSION, or handshake() raised)."""
    session_id: str
    """This connection's session; a newer handshake of the same task supersedes it."""
    num_envs: int
    """Total envs across actors."""
    env_id_begin: int
    """First env id owned by this actor's task (inclusive)."""
    env_id_end: int
    """End of this task's env ids (exclusive)."""
    config_json: str
    """The actor's part of the learner's config as JSON (seed_rl.config.ActorConfig.from_json)."""
    observation_spec: ObservationSpec
    """The observation spec the learner checks every message against (batch dimension excluded)."""
    action_spec: ArraySpec
    """The spec of one env's action."""
    local_stream_address: str = ""
    """The learner's same-host stream (seed_rl/transport/local.py), "" when it offers none."""


class ActorStream(Protocol):
    """An actor's end of one ``Stream`` on a carrier (gRPC's ``_Stream``, the same-host ``LocalStream``).

    Several messages may be sent before their answers are received; answers come back in send order.
    """

    def send(self, message: pb.StepBatch) -> None:
        """Sends one message; a failure is reported by the ``receive`` of its answer."""

    def receive(self, what: str) -> pb.ActionBatch:
        """The next answer, or the TransportError that ended the stream (``what`` names the call in messages)."""

    def close(self) -> None:
        """Ends the stream; a ``receive`` blocked in another thread raises."""


class StreamRequest(NamedTuple):
    """What a carrier needs to open a stream on the session of a handshake (see ``ACTOR_CARRIERS``)."""

    info: HandshakeInfo
    """The handshake's answer: the session, and the carriers the learner offers (``local_stream_address``)."""
    auth_token: str
    stub: pb_grpc.LearnerStub
    """The client's gRPC stub (its channel to the learner)."""
    unreachable: set[str]
    """Offered addresses this process could not reach (kept by the client across streams): a carrier adds its
    address on failure and is not tried there again."""


class _Stream:
    """One bidirectional ``Stream`` call: a request queue feeding gRPC's request iterator, and gRPC's response
    iterator. Several requests may be in flight; answers come back in request order."""

    _END = object()

    def __init__(self, stub: pb_grpc.LearnerStub, metadata: tuple[tuple[str, str], ...]) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._call = stub.Stream(self._request_iterator(), metadata=metadata)

    def _request_iterator(self) -> Iterator[pb.StepBatch]:
        while True:
            item = self._requests.get()
            if item is self._END:
                return
            yield item

    def send(self, message: pb.StepBatch) -> None:
        self._requests.put(message)

    def receive(self, what: str) -> pb.ActionBatch:
        """The next answer, or the TransportError that ended the stream."""
        try:
            return next(self._call)
        except grpc.RpcError as e:
            raise from_rpc_error(e, what) from None
        except StopIteration:
            raise LearnerUnavailableError(f"{what} failed: the learner closed the stream") from None

    def close(self) -> None:
        self._call.cancel()
        self._requests.put(self._END)  # ends gRPC's request-consuming thread


def _open_local(request: StreamRequest) -> ActorStream | None:
    address = request.info.local_stream_address
    if not address or address in request.unreachable:
        return None
    try:
        return LocalStream(address, request.info.session_id, request.auth_token)
    except OSError as e:  # another host or network namespace: nothing listens there
        request.unreachable.add(address)
        _log.info("the learner's local stream %s is not reachable (%s); streaming over gRPC", address, e)
        return None


def _open_grpc(request: StreamRequest) -> ActorStream:
    metadata: tuple[tuple[str, str], ...] = ((SESSION_METADATA_KEY, request.info.session_id),)
    if request.auth_token:
        metadata += ((TOKEN_METADATA_KEY, request.auth_token),)
    return _Stream(request.stub, metadata)


ACTOR_CARRIERS: dict[str, Callable[[StreamRequest], ActorStream | None]] = {
    "local": _open_local,  # the learner's same-host Unix socket (seed_rl/transport/local.py), when reachable
    "grpc": _open_grpc,  # always: the handshake's channel
}
"""How an actor opens its stream, by carrier name, in order of preference: the first that returns a stream (None:
not offered by the learner or not reachable from here) carries it. A new carrier is its module and one entry here
(and its learner side in ``seed_rl.transport.server.CARRIERS``; docs/architecture.md, "How to add a carrier")."""


class LearnerClient:
    """A connection from one actor (``task``) to the learner at ``address``. Use it as a context manager.

    Args:
      address: the learner's ``host:port``.
      task: this actor's task index; it owns env ids ``[task * env_batch_size, (task + 1) * env_batch_size)``.
      auth_token: the learner's shared secret, if it requires one.
      connect_timeout_s: how long :meth:`handshake` waits for the learner (None: forever, like the original).
      channel_credentials: ``grpc.ssl_channel_credentials(...)`` for TLS; None connects in plaintext
        (:mod:`seed_rl.transport.tls` makes them from PEM files).
      tls_server_name: with TLS, the name the learner's certificate must carry when it is not the host of
        ``address`` (e.g. connecting by IP); empty: the host of ``address``.
      local_stream: stream over the learner's same-host Unix socket when it offers one and this process can
        reach it (same host and network namespace); otherwise, or with False, over the gRPC ``Stream``.
      channel_options: extra gRPC channel arguments, e.g. ``(("grpc.use_local_subchannel_pool", 1),)`` to give
        this client its own TCP connection even when other clients in the process dial the same learner (gRPC
        shares one connection between channels with the same target and arguments).
    """

    def __init__(
        self,
        address: str,
        task: int,
        *,
        auth_token: str = "",
        connect_timeout_s: float | None = None,
        channel_credentials: grpc.ChannelCredentials | None = None,
        tls_server_name: str = "",
        local_stream: bool = True,
        channel_options: tuple[tuple[str, object], ...] = (),
    ) -> None:
        if tls_server_name and channel_credentials is None:
            raise ValueError("tls_server_name applies to TLS connections only: give channel_credentials too")
        self._address = address
        self._task = int(task)
        self._auth_token = auth_token
        self._connect_timeout_s = connect_timeout_s
        self._credentials = channel_credentials
        self._tls_server_name = tls_server_name
        self._local_stream = bool(local_stream)
        self._channel_options = tuple(channel_options)  # extra gRPC channel arguments, after the defaults
        self._unreachable: set[str] = set()  # offered stream addresses this process cannot connect to
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.LearnerStub | None = None
        self._stream: ActorStream | None = None
        self._carrier = ""  # the name in ACTOR_CARRIERS of the open stream's carrier
        self._info: HandshakeInfo | None = None
        self._step_lock = threading.Lock()
        self._outstanding: collections.deque[int] = collections.deque()  # rows of each unanswered step
        self._closed = False

    # ------------------------------------------------------------------------------------------------- public

    @property
    def info(self) -> HandshakeInfo | None:
        """The latest handshake's answer (None before the first handshake)."""
        return self._info

    def handshake(self) -> HandshakeInfo:
        """Waits for the learner (exponential back-off, up to ``connect_timeout_s``) and registers this task.

        Raises:
          LearnerUnavailableError: the learner could not be reached in time.
          ProtocolMismatchError: the learner speaks another protocol version.
          AuthenticationError: missing or wrong auth token.
          InvalidRequestError: the task is out of the learner's range (the message gives the valid range).
        """
        self._check_open()
        if self._stub is None:
            self._open_channel()
        assert self._stub is not None
        what = f"Handshake with the learner at {self._address} (task {self._task})"
        request = pb.HandshakeRequest(
            protocol_version=PROTOCOL_VERSION, task=self._task, auth_token=self._auth_token
        )
        timeout = self._connect_timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = _INITIAL_RETRY_DELAY_S
        started = time.monotonic()
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # Waited for in slices, so that a wait that never ends (no learner there, or TLS on one side only:
            # gRPC reports both as UNAVAILABLE) is reported in the log instead of hanging silently.
            wait = _WAIT_WARNING_PERIOD_S if remaining is None else min(remaining, _WAIT_WARNING_PERIOD_S)
            try:
                # wait_for_ready: a learner that is not up yet is waited for (gRPC reconnects with back-off)
                # rather than failing at once.
                response = self._stub.Handshake(request, timeout=wait, wait_for_ready=True)
                break
            except grpc.RpcError as e:
                error = from_rpc_error(e, what)
            if not isinstance(error, LearnerUnavailableError):
                raise error
            if self._closed:
                raise LearnerUnavailableError(f"{what}: the client was closed")
            if deadline is not None and time.monotonic() >= deadline:
                raise LearnerUnavailableError(
                    f"could not reach the learner at {self._address} within {timeout} s ({error})",
                    code=error.code,
                    reason=error.reason,
                )
            if error.code == grpc.StatusCode.DEADLINE_EXCEEDED:  # a slice ended: keep waiting, and say so
                tls_hint = (
                    "this actor uses TLS: does the learner serve it (--tls_cert_file), and does the certificate "
                    "name the address (else --tls_server_name)?"
                    if self._credentials is not None
                    else "if the learner serves TLS (--tls_cert_file), this actor needs --tls_ca_file"
                )
                _log.warning("task %d: still waiting for the learner at %s after %.0f s; is it running and "
                             "reachable? (%s)", self._task, self._address, time.monotonic() - started, tls_hint)
                continue
            # The learner answered but is not serving (e.g. stopping or restarting): back off and retry.
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(2 * delay, _MAX_RETRY_DELAY_S)

        if response.protocol_version != PROTOCOL_VERSION:
            raise ProtocolMismatchError(
                f"protocol version mismatch: the learner at {self._address} speaks version "
                f"{response.protocol_version}, this actor speaks version {PROTOCOL_VERSION}"
            )
        info = HandshakeInfo(
            protocol_version=response.protocol_version,
            session_id=response.session_id,
            num_envs=response.num_envs,
            env_id_begin=response.env_id_begin,
            env_id_end=response.env_id_end,
            config_json=response.config_json,
            observation_spec=codec.decode_observation_spec(response.observation_spec),
            action_spec=codec.decode_array_spec(response.action_spec, "action spec"),
            local_stream_address=response.local_stream_address,
        )
        self._close_stream()  # a stream of an older session would be refused as superseded
        self._info = info
        return info

    def step(self, step_batch: StepBatch) -> np.ndarray:
        """Sends one step of this actor's envs and returns their actions ``[k, ...]`` (a read-only array).

        The stream is opened on the first call after a handshake. After a failure the stream is dropped; the next
        call opens a new one in the same session (which works when the learner is still up, e.g. after a failed
        inference batch).

        Raises:
          LearnerUnavailableError: the learner is stopping, gone, closed the stream as idle (nothing sent for its
            ``stream_idle_timeout_s``), or the call was cancelled: reconnect.
          InvalidRequestError: the learner refused the message (the message says why: a shape, a dtype, an env
            id, a NaN or an infinity in a float field).
          ProtocolMismatchError: no valid session (superseded by another actor of the same task, or no
            handshake), or another stream opened on this session superseded this one.
          RowsRefusedError: the learner answered but could not act on some rows (it says which and why); the
            stream stays open: reset those envs (new run ids) and step the others with its ``actions``.
          TransportError: anything else, e.g. the learner's inference step failed.
        """
        with self._step_lock:
            if self._outstanding:
                raise RuntimeError("step() while sent steps are unanswered: receive() their actions first")
            self._send_locked(step_batch)
            return self._receive_locked()

    def send(self, step_batch: StepBatch) -> None:
        """Sends one step without waiting for its actions (pipelining): :meth:`receive` returns the actions of
        the sent steps, oldest first. The steps of one env must be sent in order; the learner keeps that order.

        Raises what :meth:`step` raises (a refused message is reported by the :meth:`receive` of its answer).
        """
        with self._step_lock:
            self._send_locked(step_batch)

    def receive(self) -> np.ndarray:
        """The actions ``[k, ...]`` for the oldest sent step not yet answered (blocks until they arrive).

        When this raises, the stream is dropped together with every unanswered step.
        """
        with self._step_lock:
            if not self._outstanding:
                raise RuntimeError("receive() without an unanswered send()")
            return self._receive_locked()

    @property
    def unanswered(self) -> int:
        """Steps sent and not yet received."""
        return len(self._outstanding)

    def _send_locked(self, step_batch: StepBatch) -> None:
        self._check_open()
        if self._info is None:
            raise ProtocolMismatchError("step() before handshake(): call handshake() first")
        message = codec.encode_step_batch(step_batch)
        if self._stream is None:
            try:
                self._stream = self._open_stream()
            except grpc.RpcError as e:
                raise from_rpc_error(e, self._what()) from None
        self._stream.send(message)
        self._outstanding.append(message.env_ids.shape[0] if message.env_ids.shape else 0)

    def _receive_locked(self) -> np.ndarray:
        rows = self._outstanding.popleft()
        what = self._what()
        assert self._stream is not None
        try:
            response = self._stream.receive(what)
        except TransportError:
            self._close_stream()
            raise
        try:
            actions = codec.decode_array(response.actions, "ActionBatch.actions")
        except ValueError as e:
            raise TransportError(f"{what}: the learner sent undecodable actions: {e}") from None
        if actions.ndim == 0 or actions.shape[0] != rows:
            raise TransportError(
                f"{what}: the learner sent actions of shape {actions.shape} for {rows} envs"
            )
        if response.refused_env_ids:
            raise RowsRefusedError(
                f"task {self._task}: {response.refusal}", actions, list(response.refused_env_ids)
            )
        return actions

    def _what(self) -> str:
        return f"Step on the stream to the learner at {self._address} (task {self._task})"

    def reconnect(self) -> HandshakeInfo:
        """Closes the stream and the channel, opens a fresh channel and handshakes again (with back-off).

        The caller must use new run ids from now on (that is what tells the learner to reset its envs).
        """
        self._check_open()
        self._close_stream()
        self._close_channel()
        self._info = None
        return self.handshake()

    def close(self) -> None:
        """Cancels the stream (a step waiting in another thread gets LearnerUnavailableError) and closes the
        channel. Idempotent."""
        self._closed = True
        self._close_stream()
        self._close_channel()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ private

    def _check_open(self) -> None:
        if self._closed:
            raise LearnerUnavailableError(f"the client of the learner at {self._address} is closed")

    def _open_channel(self) -> None:
        if self._credentials is None:
            channel = grpc.insecure_channel(self._address, options=(*CHANNEL_OPTIONS, *self._channel_options))
        else:
            options = (*CHANNEL_OPTIONS, *tls.channel_options(self._tls_server_name), *self._channel_options)
            channel = grpc.secure_channel(self._address, self._credentials, options=options)
        self._channel = channel
        self._stub = pb_grpc.LearnerStub(channel)

    @property
    def carrier(self) -> str:
        """What the open stream runs on: "local" (the same-host Unix socket), "grpc", or "" (no stream open)."""
        return self._carrier if self._stream is not None else ""

    def _open_stream(self) -> ActorStream:
        assert self._stub is not None and self._info is not None
        request = StreamRequest(self._info, self._auth_token, self._stub, self._unreachable)
        for name, open_stream in ACTOR_CARRIERS.items():
            if name == "local" and not self._local_stream:
                continue
            stream = open_stream(request)
            if stream is not None:
                self._carrier = name
                return stream
        raise LearnerUnavailableError(f"{self._what()}: no carrier could open a stream")

    def _close_stream(self) -> None:
        self._outstanding.clear()  # their answers went with the stream
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _close_channel(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            channel.close()
