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
    └── Internal              INTERNAL
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


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

    ``reason`` is an UPPER_SNAKE ErrorInfo reason; ``metadata`` holds
    content-free figures (sizes, limits, etags) as strings.
    """

    code: Code = Code.INTERNAL
    default_reason: str = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, object] | None = None,
        field_violations: Iterable[FieldViolation] = (),
        precondition_violations: Iterable[PreconditionViolation] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata = {k: str(v) for k, v in (metadata or {}).items()}
        self.field_violations = tuple(field_violations)
        self.precondition_violations = tuple(precondition_violations)
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason}: {self.message})"


class InvalidArgument(AgentCtxError):
    code = Code.INVALID_ARGUMENT
    default_reason = "INVALID_ARGUMENT"

    @classmethod
    def fields(cls, violations: Iterable[FieldViolation], *, reason: str | None = None) -> InvalidArgument:
        """One error naming every bad field, with a readable summary message."""
        violations = tuple(violations)
        summary = "; ".join(f"{v.field}: {v.description}" for v in violations[:5])
        if len(violations) > 5:
            summary += f"; and {len(violations) - 5} more"
        return cls(f"invalid request: {summary}", reason=reason, field_violations=violations)


class NotFound(AgentCtxError):
    code = Code.NOT_FOUND
    default_reason = "NOT_FOUND"


class AlreadyExists(AgentCtxError):
    code = Code.ALREADY_EXISTS
    default_reason = "ALREADY_EXISTS"


class Aborted(AgentCtxError):
    code = Code.ABORTED
    default_reason = "CONFLICT"


class FailedPrecondition(AgentCtxError):
    code = Code.FAILED_PRECONDITION
    default_reason = "FAILED_PRECONDITION"


class ResourceExhausted(AgentCtxError):
    code = Code.RESOURCE_EXHAUSTED
    default_reason = "RESOURCE_EXHAUSTED"


class PermissionDenied(AgentCtxError):
    code = Code.PERMISSION_DENIED
    default_reason = "PERMISSION_DENIED"


class Unauthenticated(AgentCtxError):
    code = Code.UNAUTHENTICATED
    default_reason = "UNAUTHENTICATED"


class Unavailable(AgentCtxError):
    code = Code.UNAVAILABLE
    default_reason = "UNAVAILABLE"


class DeadlineExceeded(AgentCtxError):
    code = Code.DEADLINE_EXCEEDED
    default_reason = "DEADLINE_EXCEEDED"


class Cancelled(AgentCtxError):
    code = Code.CANCELLED
    default_reason = "CANCELLED"


class Unimplemented(AgentCtxError):
    code = Code.UNIMPLEMENTED
    default_reason = "UNIMPLEMENTED"


class Internal(AgentCtxError):
    code = Code.INTERNAL
    default_reason = "INTERNAL"


_BY_CODE: dict[Code, type[AgentCtxError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument, NotFound, AlreadyExists, Aborted, FailedPrecondition,
        ResourceExhausted, PermissionDenied, Unauthenticated, Unavailable,
        DeadlineExceeded, Cancelled, Unimplemented, Internal,
    )
}


def error_class(code: Code) -> type[AgentCtxError]:
    """The exception class for a status code (Internal for unknown codes)."""
    return _BY_CODE.get(code, Internal)


class ConfigError(Exception):
    """Invalid configuration or environment at start-up: a one-line message
    for the operator, never a traceback."""
