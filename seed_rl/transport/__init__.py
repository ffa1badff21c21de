"""gRPC transport between the learner and its actors (no TensorFlow).

Actor side (imports no server code):

* :class:`LearnerClient` (seed_rl/transport/client.py): handshake with back-off, then ``step(StepBatch) -> actions``,
  over gRPC or, on the learner's host, the same-host Unix-socket stream (seed_rl/transport/local.py).
* :mod:`seed_rl.transport.errors`: every failure as a :class:`TransportError` subclass.
* :mod:`seed_rl.transport.tls`: TLS credentials from PEM files.

Learner side:

* :class:`InferenceServer` (seed_rl/transport/server.py): handshake + one bidirectional stream per actor, feeding a
  :class:`DynamicBatcher` (seed_rl/transport/batcher.py) that runs the inference step on batches gathered across
  actors. It starts its carriers from its registry ``CARRIERS``, one module each (the gRPC server kinds in
  seed_rl/transport/thread_server.py and aio_server.py, the same-host stream's listener in local_server.py); every
  carrier shares the session core of seed_rl/transport/session.py.

The names below are loaded on first access (PEP 562), so that ``import seed_rl.transport.client`` (what an actor
does) loads neither the server, the batcher nor the session core. The protocol, the batching rule and the error
table are in docs/transport.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seed_rl.transport.batcher import DynamicBatcher
    from seed_rl.transport.client import HandshakeInfo, LearnerClient
    from seed_rl.transport.errors import (
        AuthenticationError,
        InvalidRequestError,
        LearnerUnavailableError,
        ProtocolMismatchError,
        RowsRefusedError,
        TransportError,
    )
    from seed_rl.transport.server import InferenceServer

# name -> module that defines it; imported on first access.
_LAZY = {
    "AuthenticationError": "seed_rl.transport.errors",
    "DynamicBatcher": "seed_rl.transport.batcher",
    "HandshakeInfo": "seed_rl.transport.client",
    "InferenceServer": "seed_rl.transport.server",
    "InvalidRequestError": "seed_rl.transport.errors",
    "LearnerClient": "seed_rl.transport.client",
    "LearnerUnavailableError": "seed_rl.transport.errors",
    "ProtocolMismatchError": "seed_rl.transport.errors",
    "RowsRefusedError": "seed_rl.transport.errors",
    "TransportError": "seed_rl.transport.errors",
}

__all__ = [
    "AuthenticationError",
    "DynamicBatcher",
    "HandshakeInfo",
    "InferenceServer",
    "InvalidRequestError",
    "LearnerClient",
    "LearnerUnavailableError",
    "ProtocolMismatchError",
    "RowsRefusedError",
    "TransportError",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'seed_rl.transport' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
