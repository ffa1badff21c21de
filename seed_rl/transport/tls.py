"""TLS for the gRPC transport from PEM files, as the command line and the config name them.

The learner serves TLS with a certificate chain and its private key (``--tls_cert_file``, ``--tls_key_file``);
an actor verifies the learner against root certificates (``--tls_ca_file``) and, when it connects by an address
the certificate does not name (an IP, a load balancer), checks the name given by ``--tls_server_name`` instead.
The same-host Unix-socket stream (docs/transport.md) never leaves the host and is not encrypted; the handshake that
opens it is, and it still requires the session id and auth token.
"""

from __future__ import annotations

import grpc

__all__ = ["channel_credentials", "channel_options", "read_pem", "server_credentials"]


def read_pem(path: str, what: str) -> bytes:
    """The bytes of a PEM file, or a ValueError that names the flag and the problem."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path!r} ({e.strerror or e})") from None
    if b"-----BEGIN " not in data:
        raise ValueError(f"{what}: {path!r} is not a PEM file (no '-----BEGIN' line)")
    return data


def server_credentials(cert_file: str, key_file: str) -> grpc.ServerCredentials | None:
    """Credentials to serve TLS with, or None (plaintext) when both paths are empty.

    Raises:
      ValueError: only one of the two is given, or a file cannot be read or is not PEM.
    """
    if not cert_file and not key_file:
        return None
    if not cert_file or not key_file:
        missing = "tls_cert_file" if not cert_file else "tls_key_file"
        raise ValueError(f"TLS needs both tls_cert_file and tls_key_file; {missing} is empty")
    return grpc.ssl_server_credentials(
        [(read_pem(key_file, "tls_key_file"), read_pem(cert_file, "tls_cert_file"))]
    )


def channel_credentials(ca_file: str) -> grpc.ChannelCredentials | None:
    """Credentials that verify the learner against the root certificates in ``ca_file``; None (plaintext) when
    empty."""
    if not ca_file:
        return None
    return grpc.ssl_channel_credentials(read_pem(ca_file, "tls_ca_file"))


def channel_options(server_name: str) -> list[tuple[str, str]]:
    """gRPC channel options that make TLS check ``server_name`` instead of the host of the address."""
    return [("grpc.ssl_target_name_override", server_name)] if server_name else []
