"""The transport's exceptions, and the mapping from gRPC status codes to them.

Actors catch :class:`LearnerUnavailableError` and reconnect (with new run ids); every other
:class:`TransportError` is a bug or a misconfiguration that no retry fixes, so the actor exits non-zero.

| status code                                  | exception                  | typical cause                          |
|----------------------------------------------|----------------------------|----------------------------------------|
| UNAVAILABLE, CANCELLED, DEADLINE_EXCEEDED    | LearnerUnavailableError    | learner down, stopping or restarting   |
| FAILED_PRECONDITION                          | ProtocolMismatchError      | version mismatch, no/superseded session|
| INVALID_ARGUMENT, OUT_OF_RANGE               | InvalidRequestError        | bad shape, dtype, env id, task         |
| UNAUTHENTICATED, PERMISSION_DENIED           | AuthenticationError        | missing or wrong auth token            |
| anything else (INTERNAL, UNKNOWN, ...)       | TransportError             | the learner's inference step failed    |

A stream that names a session the learner does not know (the learner restarted between the actor's handshake and
its stream) fails with FAILED_PRECONDITION and the reason ``unknown-session``, and a gRPC stream beyond the
learner's limit with RESOURCE_EXHAUSTED and the reason ``too-many-streams``; both are raised as
:class:`LearnerUnavailableError` because a reconnect (after a back-off) fixes them.
"""

from __future__ import annotations

from typing import Any

import grpc

from seed_rl.protos import REASON_METADATA_KEY

__all__ = [
    "FINISHED_REASON",
    "REFUSED_ROWS_REASON",
    "RowsRefusedError",
    "AuthenticationError",
    "InvalidRequestError",
    "LearnerUnavailableError",
    "ProtocolMismatchError",
    "TransportError",
    "from_rpc_error",
    "from_status",
    "status_code_of",
]


class TransportError(Exception):
    """Base of the transport's exceptions.

    Attributes:
      code: the gRPC status code the error came with (None when it did not come from gRPC).
      reason: the short machine-readable reason the learner sent (``seed-rl-reason`` trailing metadata), or "".
    """

    def __init__(self, message: str, code: grpc.StatusCode | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class LearnerUnavailableError(TransportError):
    """The learner cannot be reached, is stopping, or dropped the call: reconnect (with new run ids)."""


class ProtocolMismatchError(TransportError):
    """The actor and the learner disagree on the protocol (version, specs) or the session: fatal for an actor."""


class InvalidRequestError(TransportError):
    """The learner refused a malformed message (shape, dtype, env id, task range): a bug in the caller."""


class RowsRefusedError(TransportError):
    """The learner answered a message but refused some of its rows: it could not act on them (their network
    output was not finite, or their action fell outside the spec). Not an error of the stream, which stays open:
    the caller resets the refused envs (new run ids) and steps the others with ``actions``.

    Attributes:
      actions: the message's actions ``[k, ...]``; a refused row's action is zero and must not be used.
      env_ids: the refused env ids.
    """

    def __init__(self, message: str, actions: Any, env_ids: list[int]) -> None:
        super().__init__(message, None, REFUSED_ROWS_REASON)
        self.actions = actions
        self.env_ids = env_ids


class AuthenticationError(TransportError):
    """The learner requires an auth token and the actor sent none or a wrong one."""


_CODE_TO_ERROR: dict[grpc.StatusCode, type[TransportError]] = {
    grpc.StatusCode.UNAVAILABLE: LearnerUnavailableError,
    grpc.StatusCode.CANCELLED: LearnerUnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: LearnerUnavailableError,
    grpc.StatusCode.FAILED_PRECONDITION: ProtocolMismatchError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: AuthenticationError,
}

_ERROR_TO_CODE: dict[type[TransportError], grpc.StatusCode] = {
    LearnerUnavailableError: grpc.StatusCode.UNAVAILABLE,
    ProtocolMismatchError: grpc.StatusCode.FAILED_PRECONDITION,
    InvalidRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    AuthenticationError: grpc.StatusCode.UNAUTHENTICATED,
}

# Reasons that a reconnect fixes, whatever their status code.
FINISHED_REASON = "finished"
"""The reason the learner gives when its training is finished (budget spent or target reached): an actor that
meets it exits instead of reconnecting."""

REFUSED_ROWS_REASON = "refused-rows"
"""The reason of an answer with refused rows (:class:`RowsRefusedError`), and of the INVALID_ARGUMENT that ends a
stream after the learner's ``max_refused_in_a_row`` such answers in a row."""

_RECONNECT_REASONS = frozenset({"unknown-session", "too-many-streams", FINISHED_REASON})


def status_code_of(error: TransportError) -> grpc.StatusCode:
    """The status code the server answers with for ``error`` (its own code if it has one)."""
    if error.code is not None:
        return error.code
    for cls in type(error).__mro__:
        code = _ERROR_TO_CODE.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def _reason_of(error: Any) -> str:
    try:
        metadata = error.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - not every RpcError is a Call
        return ""
    for key, value in metadata:
        if key == REASON_METADATA_KEY:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return ""


def from_rpc_error(error: grpc.RpcError, what: str) -> TransportError:
    """Turns a ``grpc.RpcError`` into the matching :class:`TransportError`, keeping the learner's message.

    Args:
      error: the error raised by a gRPC call.
      what: what was being done, for the message (e.g. ``"Handshake with 127.0.0.1:8686"``).
    """
    code = error.code() if callable(getattr(error, "code", None)) else None
    details = error.details() if callable(getattr(error, "details", None)) else str(error)
    return from_status(code, details, _reason_of(error), what)


def from_status(code: grpc.StatusCode | None, details: str, reason: str, what: str) -> TransportError:
    """The :class:`TransportError` for a failed call's status (gRPC's, or one sent on the same-host stream)."""
    if reason in _RECONNECT_REASONS:
        cls: type[TransportError] = LearnerUnavailableError
    else:
        cls = _CODE_TO_ERROR.get(code, TransportError) if code is not None else TransportError
    code_name = code.name if code is not None else "UNKNOWN"
    return cls(f"{what} failed ({code_name}): {details}", code=code, reason=reason)


_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_code_from_number(number: int) -> grpc.StatusCode:
    """The gRPC status code with this number (UNKNOWN for a number gRPC does not define)."""
    return _CODES_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
