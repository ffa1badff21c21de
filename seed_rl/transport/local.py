"""The same-host stream, actor side and framing: an actor's ``Stream`` messages over a Unix domain socket.

An actor on the learner's host spends most of its transport time in grpcio's Python stream machinery, not on the
wire: a sync bidirectional stream hands every message to a gRPC thread and every answer back, costing actor CPU per
message and about as much again in the learner's gRPC threads (benchmarks/RESULTS.md, "Why the fast paths exist",
and the transport-overhead table). The
same-host stream carries the *same* protobuf messages over a Unix socket with one ``sendall`` and one buffered read
per message on each side. Everything else is shared with the gRPC stream: the handshake stays on gRPC (specs,
session, auth token), every message goes through the same validation, sessions and batcher on the learner
(:class:`~seed_rl.transport.session.SessionCore`, served by seed_rl/transport/local_server.py), answers come back in
send order with up to 16 messages in flight, and every failure is reported as the status gRPC would have carried
(``StreamStatus``), which :class:`LocalStream` raises as the same :mod:`~seed_rl.transport.errors` exception.

Framing (seed_rl.proto, ``LocalStreamOpen``): each frame is a 4-byte little-endian length and the serialized
message. The actor sends ``LocalStreamOpen`` (session id, auth token), then ``StepBatch`` frames; the learner
answers each with a ``LocalStreamReply``: actions, or an error status after which it closes the connection.

The learner listens on a Linux abstract socket with a random 128-bit name (no file to clean up, gone with the
process) and advertises it in ``HandshakeResponse.local_stream_address``. An actor on another host (or in another
network namespace) cannot connect to it and uses the gRPC ``Stream``; so can anyone with ``local_stream=False``.

This module holds what both ends share (the address form, the framing) and the actor's end, :class:`LocalStream`;
it imports no server code, so the actor side (seed_rl/transport/client.py) stays free of it. Imports no TensorFlow.
"""

from __future__ import annotations

import socket
import struct
import sys
from typing import Any

from seed_rl.protos import MAX_MESSAGE_BYTES
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.transport.errors import (
    LearnerUnavailableError,
    TransportError,
    from_status,
    status_code_from_number,
)

__all__ = [
    "ADDRESS_PREFIX",
    "READ_BUFFER_BYTES",
    "LocalStream",
    "local_stream_supported",
    "read_frame",
    "send_frame",
    "shutdown_socket",
    "socket_name",
]

ADDRESS_PREFIX = "unix-abstract:"
"""How a local stream address starts: the rest is the name of a Linux abstract Unix socket."""

READ_BUFFER_BYTES = 1 << 16
"""The buffer of the file object that each end reads its frames from."""

_HEADER = struct.Struct("<I")


def local_stream_supported() -> bool:
    """Abstract Unix sockets are a Linux feature; elsewhere the learner offers no local stream."""
    return sys.platform.startswith("linux")


def socket_name(address: str) -> bytes:
    """The abstract socket name (a leading NUL byte) of ``address``; ValueError when it is no local address."""
    if not address.startswith(ADDRESS_PREFIX):
        raise ValueError(f"not a local stream address: {address!r} (expected {ADDRESS_PREFIX}NAME)")
    return b"\0" + address[len(ADDRESS_PREFIX) :].encode()


def send_frame(sock: socket.socket, payload: bytes) -> None:
    """Writes one frame: the 4-byte little-endian length of ``payload``, then ``payload``."""
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def read_frame(reader: Any, max_bytes: int = MAX_MESSAGE_BYTES) -> bytes | None:
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


def shutdown_socket(sock: socket.socket) -> None:
    """Wakes every thread blocked on ``sock`` (a read returns end-of-stream) and closes it; idempotent."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected any more
    sock.close()


class LocalStream:
    """The actor's end: the interface of the gRPC stream in client.py (send, receive, close).

    Raises:
      OSError: from the constructor, when nothing listens at ``address`` on this host (use gRPC then).
    """

    def __init__(self, address: str, session_id: str, auth_token: str) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(socket_name(address))
            send_frame(
                sock, pb.LocalStreamOpen(session_id=session_id, auth_token=auth_token).SerializeToString()
            )
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._reader = sock.makefile("rb", buffering=READ_BUFFER_BYTES)
        self._send_failed = False

    def send(self, message: pb.StepBatch) -> None:
        if self._send_failed:
            return  # receive() reports why the stream ended
        try:
            send_frame(self._sock, message.SerializeToString())
        except OSError:
            # The learner closed the connection; it may have written why (an error reply) before it did.
            self._send_failed = True

    def receive(self, what: str) -> pb.ActionBatch:
        """The next answer, or the TransportError that ended the stream."""
        try:
            payload = read_frame(self._reader)
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
        shutdown_socket(self._sock)  # a receive() blocked in another thread sees the end of the stream
        self._reader.close()
