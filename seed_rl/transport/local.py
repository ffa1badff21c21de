"""The same-host stream: an actor's ``Stream`` messages over a Unix domain socket instead of gRPC.

An actor on the learner's host spends most of its transport time in grpcio's Python stream machinery, not on the
wire: a sync bidirectional stream hands every message to a gRPC thread and every answer back, ~0.4-0.5 ms of actor
CPU per message and about as much in the learner's gRPC threads (benchmarks/RESULTS.md, transport overhead). This
module carries the *same* protobuf messages over a Unix socket with one ``sendall`` and one buffered read per
message on each side. Everything else is shared with the gRPC stream: the handshake stays on gRPC (specs, session,
auth token), every message goes through the same validation, sessions and batcher (``server._Core``), answers come
back in send order with up to 16 messages in flight, and every failure is reported as the status gRPC would have
carried (``StreamStatus``), which the client raises as the same :mod:`~seed_rl.transport.errors` exception.

Framing (seed_rl.proto, ``LocalStreamOpen``): each frame is a 4-byte little-endian length and the serialized
message. The actor sends ``LocalStreamOpen`` (session id, auth token), then ``StepBatch`` frames; the learner
answers each with a ``LocalStreamReply``: actions, or an error status after which it closes the connection.

The learner listens on a Linux abstract socket with a random 128-bit name (no file to clean up, gone with the
process) and advertises it in ``HandshakeResponse.local_stream_address``. An actor on another host (or in another
network namespace) cannot connect to it and uses the gRPC ``Stream``; so can anyone with ``local_stream=False``.
Imports no TensorFlow.
"""

from __future__ import annotations

import collections
import concurrent.futures
import secrets
import socket
import struct
import sys
import threading
from typing import Any

import grpc

from seed_rl.protos import MAX_MESSAGE_BYTES, SESSION_METADATA_KEY, TOKEN_METADATA_KEY
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.transport.errors import (
    LearnerUnavailableError,
    TransportError,
    from_status,
    status_code_from_number,
)
from seed_rl.transport.server import _Abort, _Core

__all__ = ["ADDRESS_PREFIX", "LocalStream", "LocalStreamServer", "local_stream_supported"]

ADDRESS_PREFIX = "unix-abstract:"
"""How a local stream address starts: the rest is the name of a Linux abstract Unix socket."""

_HEADER = struct.Struct("<I")
_MAX_READ_AHEAD = 16  # unanswered messages per connection before the learner stops reading it
_ACCEPT_POLL_S = 0.25
_READ_BUFFER = 1 << 16


def local_stream_supported() -> bool:
    """Abstract Unix sockets are a Linux feature; elsewhere the learner offers no local stream."""
    return sys.platform.startswith("linux")


def _socket_name(address: str) -> bytes:
    if not address.startswith(ADDRESS_PREFIX):
        raise ValueError(f"not a local stream address: {address!r} (expected {ADDRESS_PREFIX}NAME)")
    return b"\0" + address[len(ADDRESS_PREFIX) :].encode()


def _send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _read_frame(reader: Any, max_bytes: int = MAX_MESSAGE_BYTES) -> bytes | None:
    """The next frame's payload; None at the end of the stream (also in the middle of a frame).

    Raises:
      ValueError: the frame announces more than ``max_bytes``.
    """
    header = reader.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise ValueError(f"a frame of {size} bytes exceeds the limit of {max_bytes} bytes")
    payload = reader.read(size)
    if len(payload) < size:
        return None
    return payload


def _shutdown(sock: socket.socket) -> None:
    """Wakes every thread blocked on ``sock`` (a read returns end-of-stream) and closes it; idempotent."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected any more
    sock.close()


# ------------------------------------------------------------------------------------------------- learner


class _Connection:
    """One actor's local stream on the learner: a reader thread queues its messages with the batcher; each
    answer is written by whichever thread completes it (the batcher's), oldest first, under ``_lock``."""

    def __init__(self, core: _Core, sock: socket.socket, on_close: Any) -> None:
        self._core = core
        self._sock = sock
        self._on_close = on_close
        self._lock = threading.Lock()
        # (future, counted): counted futures are queued requests (in core.inflight); an uncounted one carries
        # the _Abort that refused a message, answered after the earlier messages' actions.
        self._outstanding: collections.deque[tuple[concurrent.futures.Future, bool]] = collections.deque()
        self._room = threading.Semaphore(_MAX_READ_AHEAD)
        self._closed = False

    def serve(self) -> None:
        reader = self._sock.makefile("rb", buffering=_READ_BUFFER)
        refused = False  # a refusal waits behind the earlier messages' answers; _flush closes after it
        try:
            session = self._core.open_stream(self._open_metadata(reader))
            while True:
                payload = _read_frame(reader)
                if payload is None:
                    return  # the actor closed the stream or died: its unanswered messages are withdrawn
                try:
                    message = pb.StepBatch.FromString(payload)
                except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
                    raise _Abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"StepBatch: not a valid serialized message ({e})",
                        "invalid-message",
                    ) from None
                self._room.acquire()
                if self._closed:
                    return
                future = self._core.submit(session, message)  # raises _Abort for a refused message
                with self._lock:
                    if self._closed:
                        future.cancel()
                        return
                    self._outstanding.append((future, True))
                self._core.add_inflight(1)
                future.add_done_callback(self._flush)
        except _Abort as abort:
            refused = self._refuse(abort)
        except ValueError as e:  # an oversized frame
            refused = self._refuse(_Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e), "invalid-message"))
        except OSError:
            pass  # the connection broke: the actor is gone
        finally:
            reader.close()
            if not refused:
                self.close()

    def _open_metadata(self, reader: Any) -> tuple[tuple[str, str], ...]:
        try:
            payload = _read_frame(reader, max_bytes=1 << 16)
            opening = pb.LocalStreamOpen.FromString(payload if payload is not None else b"")
        except Exception as e:  # noqa: BLE001 - an oversized or undecodable first frame
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the local stream must start with a LocalStreamOpen message ({e})",
                "invalid-message",
            ) from None
        metadata: tuple[tuple[str, str], ...] = ()
        if opening.session_id:
            metadata += ((SESSION_METADATA_KEY, opening.session_id),)
        if opening.auth_token:
            metadata += ((TOKEN_METADATA_KEY, opening.auth_token),)
        return metadata

    def _refuse(self, abort: Exception) -> bool:
        """Queues ``abort`` as the answer after the earlier messages' actions; False when already closed."""
        refusal: concurrent.futures.Future = concurrent.futures.Future()
        refusal.set_exception(abort)
        with self._lock:
            if self._closed:
                return False
            self._outstanding.append((refusal, False))
        self._flush()
        return True

    def _flush(self, _done: concurrent.futures.Future | None = None) -> None:
        """Writes the answers that are ready, oldest first; after an error reply, closes the connection."""
        answered = 0
        ended = False
        with self._lock:
            while self._outstanding and not self._closed and self._outstanding[0][0].done():
                future, counted = self._outstanding.popleft()
                answered += counted
                if future.cancelled():
                    continue
                error = future.exception()
                if error is None:
                    try:
                        reply = pb.LocalStreamReply(actions=self._core.encode_actions(future.result()))
                    except _Abort as refusal:
                        error = refusal
                if error is not None:
                    status = error if isinstance(error, _Abort) else self._core.abort_for(error)
                    reply = pb.LocalStreamReply(
                        error=pb.StreamStatus(
                            code=status.code.value[0], details=status.details, reason=status.reason
                        )
                    )
                    ended = True
                try:
                    _send_frame(self._sock, reply.SerializeToString())
                except OSError:
                    ended = True  # the actor is gone
                if ended:
                    break
        if answered:
            self._core.add_inflight(-answered)
            for _ in range(answered):
                self._room.release()
        if ended:
            self.close()

    def close(self) -> None:
        """Withdraws every unanswered request and closes the socket; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            doomed = [future for future, counted in self._outstanding if counted]
            self._outstanding.clear()
        for future in doomed:
            future.cancel()
        if doomed:
            self._core.add_inflight(-len(doomed))
        self._room.release()  # a reader waiting for room wakes, sees `closed` and ends
        _shutdown(self._sock)
        self._on_close(self)


class LocalStreamServer:
    """Listens on a fresh abstract Unix socket and serves each connection with ``core`` (see the module doc)."""

    def __init__(self, core: _Core) -> None:
        self._core = core
        self.address = ADDRESS_PREFIX + f"seed_rl-{secrets.token_hex(16)}"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(_socket_name(self.address))
        self._listener.listen(128)
        self._listener.settimeout(_ACCEPT_POLL_S)
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="seed_rl-local-accept", daemon=True)
        self._thread.start()

    @property
    def active_streams(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed
            sock.settimeout(None)
            connection = _Connection(self._core, sock, self._forget)
            with self._lock:
                if self._stopped.is_set():
                    _shutdown(sock)
                    return
                self._connections.add(connection)
            threading.Thread(target=connection.serve, name="seed_rl-local-stream", daemon=True).start()

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def stop(self) -> None:
        """Stops accepting and closes every connection (their actors see the learner go away)."""
        self._stopped.set()
        self._listener.close()
        self._thread.join(timeout=2 * _ACCEPT_POLL_S + 1.0)
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()


# --------------------------------------------------------------------------------------------------- actor


class LocalStream:
    """The actor's end: the interface of the gRPC stream in client.py (send, receive, close).

    Raises:
      OSError: from the constructor, when nothing listens at ``address`` on this host (use gRPC then).
    """

    def __init__(self, address: str, session_id: str, auth_token: str) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(_socket_name(address))
            _send_frame(
                sock, pb.LocalStreamOpen(session_id=session_id, auth_token=auth_token).SerializeToString()
            )
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._reader = sock.makefile("rb", buffering=_READ_BUFFER)
        self._send_failed = False

    def send(self, message: pb.StepBatch) -> None:
        if self._send_failed:
            return  # receive() reports why the stream ended
        try:
            _send_frame(self._sock, message.SerializeToString())
        except OSError:
            # The learner closed the connection; it may have written why (an error reply) before it did.
            self._send_failed = True

    def receive(self, what: str) -> pb.ActionBatch:
        """The next answer, or the TransportError that ended the stream."""
        try:
            payload = _read_frame(self._reader)
        except (OSError, ValueError) as e:
            raise LearnerUnavailableError(f"{what} failed: the local stream broke ({e})") from None
        if payload is None:
            raise LearnerUnavailableError(f"{what} failed: the learner closed the stream")
        try:
            reply = pb.LocalStreamReply.FromString(payload)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError
            raise TransportError(f"{what}: the learner sent an undecodable reply ({e})") from None
        if reply.HasField("error"):
            status = reply.error
            raise from_status(status_code_from_number(status.code), status.details, status.reason, what)
        return reply.actions

    def close(self) -> None:
        _shutdown(self._sock)  # a receive() blocked in another thread sees the end of the stream
        self._reader.close()
