"""Errors that carry their gRPC status.

Domain code raises these; one server interceptor turns them into a rich
``google.rpc.Status`` (ErrorInfo, BadRequest, PreconditionFailure, RetryInfo).
This module imports no grpc so that pure domain code can use it.

Exception tree::

    AgentCtxError
    ├── InvalidArgument       INVALID_ARGUMENT   (field violations)
    ├── NotFound              NOT_FOUND
    ├── AlreadyExists         ALREADY_EXISTS
    ├── Aborted               ABORTED            (etag or prefix conflicts)
    ├── FailedPrecondition    FAILED_PRECONDITION
    ├── ResourceExhausted     RESOURCE_EXHAUSTED (budgets, sizes, rate limits)
    ├── PermissionDenied      PERMISSION_DENIED
    ├── Unauthenticated       UNAUTHENTICATED
    ├── Unavailable           UNAVAILABLE        (transient; retry_after)
    ├── DeadlineExceeded      DEADLINE_EXCEEDED
    ├── Cancelled             CANCELLED
    ├── Unimplemented         UNIMPLEMENTED
    ├── Internal              INTERNAL
    ├── Unknown               UNKNOWN
    ├── OutOfRange            OUT_OF_RANGE
    └── DataLoss              DATA_LOSS

Every error carries a ``Reason`` (agentctx_common.reasons, generated from
the protos' ErrorReason enum): code raises and branches on the enum, never
on strings. docs/ARCHITECTURE.md ("Errors") shows the whole path.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agentctx_common.reasons import Reason


class Code(enum.Enum):
    """gRPC status codes, by name (values match grpc.StatusCode names)."""

    CANCELLED = "CANCELLED"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ABORTED = "ABORTED"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"
    UNAVAILABLE = "UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    UNKNOWN = "UNKNOWN"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    DATA_LOSS = "DATA_LOSS"


@dataclass(frozen=True)
class FieldViolation:
    """One bad field: a dotted path such as ``policy.max_bytes`` and why."""

    field: str
    description: str


@dataclass(frozen=True)
class PreconditionViolation:
    """One unmet precondition, as in google.rpc.PreconditionFailure."""

    type: str
    subject: str
    description: str


class AgentCtxError(Exception):
    """Base of every error that maps to a gRPC status.

    ``reason`` is the ErrorInfo reason; ``metadata`` holds content-free
    figures (sizes, limits, etags) as strings. ``wire_reason`` is the reason
    string as sent: the same as ``reason`` unless the error was decoded from
    a peer that sent a reason this code does not know (then ``reason`` is
    the code's generic one).
    """

    code: Code = Code.INTERNAL
    default_reason: Reason = Reason.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        metadata: Mapping[str, object] | None = None,
        field_violations: Iterable[FieldViolation] = (),
        precondition_violations: Iterable[PreconditionViolation] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        # Reason() also takes a member's name, so a stray string still maps (or fails loudly).
        self.reason: Reason = Reason(reason) if reason else self.default_reason
        self.wire_reason: str = self.reason.value
        self.metadata = {k: str(v) for k, v in (metadata or {}).items()}
        self.field_violations = tuple(field_violations)
        self.precondition_violations = tuple(precondition_violations)
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason}: {self.message})"


class InvalidArgument(AgentCtxError):
    code = Code.INVALID_ARGUMENT
    default_reason = Reason.INVALID_ARGUMENT

    @classmethod
    def fields(cls, violations: Iterable[FieldViolation], *, reason: Reason | None = None) -> InvalidArgument:
        """One error naming every bad field, with a readable summary message."""
        violations = tuple(violations)
        summary = "; ".join(f"{v.field}: {v.description}" for v in violations[:5])
        if len(violations) > 5:
            summary += f"; and {len(violations) - 5} more"
        return cls(f"invalid request: {summary}", reason=reason, field_violations=violations)


class NotFound(AgentCtxError):
    code = Code.NOT_FOUND
    default_reason = Reason.NOT_FOUND


class AlreadyExists(AgentCtxError):
    code = Code.ALREADY_EXISTS
    default_reason = Reason.ALREADY_EXISTS


class Aborted(AgentCtxError):
    code = Code.ABORTED
    default_reason = Reason.CONFLICT


class FailedPrecondition(AgentCtxError):
    code = Code.FAILED_PRECONDITION
    default_reason = Reason.FAILED_PRECONDITION


class ResourceExhausted(AgentCtxError):
    code = Code.RESOURCE_EXHAUSTED
    default_reason = Reason.RESOURCE_EXHAUSTED


class PermissionDenied(AgentCtxError):
    code = Code.PERMISSION_DENIED
    default_reason = Reason.PERMISSION_DENIED


class Unauthenticated(AgentCtxError):
    code = Code.UNAUTHENTICATED
    default_reason = Reason.UNAUTHENTICATED


class Unavailable(AgentCtxError):
    code = Code.UNAVAILABLE
    default_reason = Reason.UNAVAILABLE


class DeadlineExceeded(AgentCtxError):
    code = Code.DEADLINE_EXCEEDED
    default_reason = Reason.DEADLINE_EXCEEDED


class Cancelled(AgentCtxError):
    code = Code.CANCELLED
    default_reason = Reason.CANCELLED


class Unimplemented(AgentCtxError):
    code = Code.UNIMPLEMENTED
    default_reason = Reason.UNIMPLEMENTED


class Internal(AgentCtxError):
    code = Code.INTERNAL
    default_reason = Reason.INTERNAL


class Unknown(AgentCtxError):
    code = Code.UNKNOWN
    default_reason = Reason.UNKNOWN


class OutOfRange(AgentCtxError):
    code = Code.OUT_OF_RANGE
    default_reason = Reason.OUT_OF_RANGE


class DataLoss(AgentCtxError):
    code = Code.DATA_LOSS
    default_reason = Reason.DATA_LOSS


_BY_CODE: dict[Code, type[AgentCtxError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument, NotFound, AlreadyExists, Aborted, FailedPrecondition,
        ResourceExhausted, PermissionDenied, Unauthenticated, Unavailable,
        DeadlineExceeded, Cancelled, Unimplemented, Internal, Unknown,
        OutOfRange, DataLoss,
    )
}
assert set(_BY_CODE) == set(Code), "every code has its exception class"


def error_class(code: Code) -> type[AgentCtxError]:
    """The exception class for a status code."""
    return _BY_CODE[code]


class ConfigError(Exception):
    """Invalid configuration or environment at start-up: a one-line message
    for the operator, never a traceback."""
