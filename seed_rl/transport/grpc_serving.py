"""What the learner's gRPC server kinds share: where and how they listen, and the service they serve.

The gRPC server kinds (the thread pool of seed_rl/transport/thread_server.py, grpc.aio of
seed_rl/transport/aio_server.py) are started from ``seed_rl.transport.server.CARRIERS`` with a
:class:`ServerSettings` (the address, TLS, the gRPC options and each kind's own size). Both serve
:func:`learner_service` and bind with :func:`bind`. Two checks of the learner's listening socket live here too:
:func:`refuse_busy_port` (is something listening on the port already?) and :func:`receive_window_bytes` (the HTTP/2
receive window the learner announces, sized to its actors' messages; docs/transport.md, "Flow control").

Learner side only; imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import errno
import socket
from typing import Any

import grpc

from seed_rl.protos import MAX_MESSAGE_BYTES, codec
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.protos import seed_rl_pb2_grpc as pb_grpc
from seed_rl.types import ObservationSpec

__all__ = [
    "RECEIVE_WINDOW_MIN_BYTES",
    "ServerSettings",
    "bind",
    "learner_service",
    "receive_window_bytes",
    "refuse_busy_port",
    "with_option",
]


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """What ``InferenceServer`` hands each carrier's ``start``: where and how its gRPC servers listen (a carrier
    beside gRPC, such as the same-host socket, needs none of it)."""

    address: str
    """``host:port`` to listen on (port 0: a free one)."""
    credentials: grpc.ServerCredentials | None
    """TLS credentials; None serves plaintext."""
    grpc_options: tuple[tuple[str, Any], ...]
    """The gRPC server arguments (``server.SERVER_OPTIONS``, the receive window and the caller's own)."""
    max_workers: int
    """"threads" only: the worker threads of the pool."""
    aio_listeners: int
    """"aio" only: grpc.aio servers that share the port and the event loop."""


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


def bind(server: grpc.Server | grpc.aio.Server, settings: ServerSettings, address: str | None = None) -> int:
    """Binds ``server`` to ``address`` (default: the settings' address) with the settings' credentials and
    returns the bound port; OSError when it cannot listen there."""
    address = address or settings.address
    try:
        if settings.credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, settings.credentials)
    except RuntimeError as e:
        raise OSError(f"cannot listen on {address}: {e}") from e
    if port == 0:
        raise OSError(f"cannot listen on {address} (address in use or invalid)")
    return port


def with_option(options: tuple, name: str, value: object) -> tuple:
    """``options`` with the gRPC argument ``name`` set to ``value`` (replacing any of that name)."""
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


RECEIVE_WINDOW_MIN_BYTES = 1 << 20
"""The smallest receive window the learner announces (1 MiB), however small its messages."""


def receive_window_bytes(observation_spec: ObservationSpec, env_batch_size: int) -> int:
    """The HTTP/2 receive window (per stream and per connection) the learner announces: room for two full
    messages of an actor (``env_batch_size`` envs; an actor with two env groups has both halves in flight), at
    least ``RECEIVE_WINDOW_MIN_BYTES`` and at most ``MAX_MESSAGE_BYTES``. An actor's message then crosses in
    one round trip however far away the actor is, as with gRPC's own window tuning, without its probing."""
    wanted = 2 * codec.step_batch_bytes(observation_spec, env_batch_size)
    return int(min(MAX_MESSAGE_BYTES, max(RECEIVE_WINDOW_MIN_BYTES, wanted)))
