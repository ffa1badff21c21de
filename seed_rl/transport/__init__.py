"""gRPC transport between the learner and its actors (no TensorFlow).

* :class:`InferenceServer` (learner): handshake + one bidirectional stream per actor, feeding a
  :class:`DynamicBatcher` that runs the inference step on batches gathered across actors.
* :class:`LearnerClient` (actor): handshake with back-off, then ``step(StepBatch) -> actions``.
* :mod:`seed_rl.transport.errors`: every failure as a :class:`TransportError` subclass.

The protocol, the batching rule and the error table are in docs/transport.md.
"""

from __future__ import annotations

from seed_rl.transport.batcher import DynamicBatcher
from seed_rl.transport.client import HandshakeInfo, LearnerClient
from seed_rl.transport.errors import (
    AuthenticationError,
    InvalidRequestError,
    LearnerUnavailableError,
    ProtocolMismatchError,
    TransportError,
)
from seed_rl.transport.server import InferenceServer

__all__ = [
    "AuthenticationError",
    "DynamicBatcher",
    "HandshakeInfo",
    "InferenceServer",
    "InvalidRequestError",
    "LearnerClient",
    "LearnerUnavailableError",
    "ProtocolMismatchError",
    "TransportError",
]
