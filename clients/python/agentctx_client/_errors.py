"""Failed calls as exceptions, decoded from the server's google.rpc.Status.

Each gRPC code has one class; the details the server attached (ErrorInfo
reason and metadata, BadRequest field violations, PreconditionFailure,
RetryInfo) become attributes. The class tree is in the package docstring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import grpc
from google.rpc import error_details_pb2, status_pb2

from agentctx.error.v1.error_reason_pb2 import ErrorReason

#: ErrorInfo.domain of every reason agentctx sends.
ERROR_DOMAIN = "agentctx.dev"
_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class FieldViolation:
    """One bad request field: a dotted path such as ``policy.max_bytes``."""

    field: str
    description: str


@dataclass(frozen=True)
class PreconditionViolation:
    """One unmet precondition (google.rpc.PreconditionFailure.Violation)."""

    type: str
    subject: str
    description: str


class AgentCtxError(Exception):
    """A failed call.

    ``reason`` is the ErrorInfo reason as an ``ErrorReason`` value (which
    prints as its name and compares equal to ``ErrorReason.ETAG_MISMATCH``
    and the like), or the
    raw string when this client does not know it (then decide by the class,
    that is by the gRPC code). A failure without ErrorInfo (for example a
    transport error) has the generic reason of its code. ``metadata`` holds
    the reason's content-free figures as strings; ``retry_delay`` is the
    RetryInfo delay in seconds, or None; ``status`` is the whole
    google.rpc.Status when the server sent one.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        reason: ErrorReason | str | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[FieldViolation] = (),
        precondition_violations: Sequence[PreconditionViolation] = (),
        retry_delay: float | None = None,
        status: status_pb2.Status | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason: ErrorReason | str = _GENERIC_REASON[self.code] if reason is None else _named(reason)
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations: tuple[FieldViolation, ...] = tuple(field_violations)
        self.precondition_violations: tuple[PreconditionViolation, ...] = tuple(precondition_violations)
        self.retry_delay = retry_delay
        self.status = status

    @property
    def reason_name(self) -> str:
        """The reason as sent on the wire (for logs)."""
        return self.reason if isinstance(self.reason, str) else ErrorReason.Name(self.reason)

    def __str__(self) -> str:
        return f"{self.message} [{self.code.name} {self.reason_name}]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason_name}: {self.message!r})"


class InvalidArgumentError(AgentCtxError):
    """INVALID_ARGUMENT: fix the request; ``field_violations`` name each bad field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class OutOfRangeError(AgentCtxError):
    """OUT_OF_RANGE: a value is outside its valid range."""

    code = grpc.StatusCode.OUT_OF_RANGE


class NotFoundError(AgentCtxError):
    """NOT_FOUND: the session (or another named resource) does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(AgentCtxError):
    """ALREADY_EXISTS: the session id is taken, or an event id was reused
    with different content."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ConflictError(AgentCtxError):
    """ABORTED: a concurrent change won. Re-read, then retry the change."""

    code = grpc.StatusCode.ABORTED

    @property
    def current_etag(self) -> str | None:
        """The session's etag now (with reason ETAG_MISMATCH)."""
        return self.metadata.get("current_etag")


class FailedPreconditionError(AgentCtxError):
    """FAILED_PRECONDITION: the system is not in a state that allows the call."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhaustedError(AgentCtxError):
    """RESOURCE_EXHAUSTED: a limit was reached. With ``retry_delay`` (a rate
    limit or a full registry) waiting helps; without it, it does not."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class BudgetExceededError(ResourceExhaustedError):
    """RESOURCE_EXHAUSTED because the request does not fit a context budget
    or the model's context window. Retrying the same call fails the same
    way: shrink the input, tighten the selection policy or compact."""

    @property
    def limit(self) -> str | None:
        """Which limit was exceeded (for example "max_tokens")."""
        return self.metadata.get("limit")


class PermissionDeniedError(AgentCtxError):
    """PERMISSION_DENIED: the caller's identity may not do this."""

    code = grpc.StatusCode.PERMISSION_DENIED


class UnauthenticatedError(AgentCtxError):
    """UNAUTHENTICATED: the call carried no valid identity."""

    code = grpc.StatusCode.UNAUTHENTICATED


class UnavailableError(AgentCtxError):
    """UNAVAILABLE: transient. Retry the same call (same ids) after
    ``retry_delay``; the client does so itself within its RetryPolicy."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceededError(AgentCtxError):
    """DEADLINE_EXCEEDED: the call's deadline passed."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class CallCancelledError(AgentCtxError):
    """CANCELLED: the call was cancelled (by the server or the channel)."""

    code = grpc.StatusCode.CANCELLED


class UnimplementedError(AgentCtxError):
    """UNIMPLEMENTED: the method or option is not available on this server."""

    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(AgentCtxError):
    """INTERNAL: a server bug; the message is generic."""

    code = grpc.StatusCode.INTERNAL


class DataLossError(AgentCtxError):
    """DATA_LOSS: stored data is unreadable."""

    code = grpc.StatusCode.DATA_LOSS


class UnknownError(AgentCtxError):
    """UNKNOWN: an error nobody could classify (also a failure claiming OK)."""

    code = grpc.StatusCode.UNKNOWN


_BY_CODE: dict[grpc.StatusCode, type[AgentCtxError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError, OutOfRangeError, NotFoundError, AlreadyExistsError, ConflictError,
        FailedPreconditionError, ResourceExhaustedError, PermissionDeniedError, UnauthenticatedError,
        UnavailableError, DeadlineExceededError, CallCancelledError, UnimplementedError, InternalError,
        DataLossError, UnknownError,
    )
}

class _NamedReason(int):
    """An ErrorReason value that prints as its name: ``print(err.reason)``
    shows ``ETAG_MISMATCH``, not 40, and it still equals (and hashes as)
    ``ErrorReason.ETAG_MISMATCH``."""

    __slots__ = ()

    def __str__(self) -> str:
        return ErrorReason.Name(self)

    def __repr__(self) -> str:
        return f"ErrorReason.{ErrorReason.Name(self)}"

    __format__ = int.__format__  # {:d} still formats the number; {} the name (str)


def reason_of(name: str) -> ErrorReason:
    """The ErrorReason value of a reason name (ValueError if unknown)."""
    # Value() is typed as returning int; at run time the members are ints too.
    return cast(ErrorReason, _NamedReason(ErrorReason.Value(name)))


def _named(reason: ErrorReason | str) -> ErrorReason | str:
    if isinstance(reason, int) and not isinstance(reason, _NamedReason) and reason in ErrorReason.values():
        return cast(ErrorReason, _NamedReason(reason))
    return reason


# The generic reason of each code: its own name, except ABORTED's.
_GENERIC_REASON: dict[grpc.StatusCode, ErrorReason] = {
    code: ErrorReason.CONFLICT if code is grpc.StatusCode.ABORTED else reason_of(code.name)
    for code in _BY_CODE
}

_BUDGET_REASONS = frozenset({
    ErrorReason.CONTEXT_BUDGET_EXCEEDED,
    ErrorReason.CURRENT_INPUT_EXCEEDS_BUDGET,
    ErrorReason.REQUEST_CONTEXT_BUDGET_EXCEEDED,
    ErrorReason.COMPRESSED_CONTEXT_OVER_BUDGET,
    ErrorReason.ATTACHMENT_BUDGET_EXCEEDED,
    ErrorReason.CONTEXT_WINDOW_EXCEEDED,
    ErrorReason.CONTEXT_WINDOW_EXCEEDED_AFTER_COMPACTION,
})


def error_class(code: grpc.StatusCode) -> type[AgentCtxError]:
    """The exception class of a gRPC code (UnknownError for OK)."""
    return _BY_CODE.get(code, UnknownError)


# What grpc.aio reports (as INTERNAL, without a server status) when writing a
# request message fails because the call's transport is gone.
_WRITE_BROKE = "Internal error from Core"


def status_of(err: grpc.RpcError) -> status_pb2.Status | None:
    """The google.rpc.Status the server attached to a failed call, if any."""
    trailing = getattr(err, "trailing_metadata", None)
    for key, value in (trailing() if callable(trailing) else None) or ():
        if key == _DETAILS_KEY and isinstance(value, bytes):
            return status_pb2.Status.FromString(value)
    return None


def error_from_rpc(err: grpc.RpcError) -> AgentCtxError:
    """The AgentCtxError for a failed call of a raw stub (grpc.aio.AioRpcError)."""
    code_of = getattr(err, "code", None)
    code = code_of() if callable(code_of) else grpc.StatusCode.UNKNOWN
    details_of = getattr(err, "details", None)
    message = (details_of() if callable(details_of) else None) or code.name
    cls = error_class(code)
    status = status_of(err)
    if status is None:
        if code is grpc.StatusCode.INTERNAL and message == _WRITE_BROKE:
            # grpc.aio's own status for a request message it could not send
            # because the connection broke first (the server's status never
            # arrived): the server did not get the whole request.
            return UnavailableError("the connection broke while the request was being sent",
                                    reason=ErrorReason.UNAVAILABLE)
        return cls(message)

    reason: ErrorReason | str | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    preconditions: list[PreconditionViolation] = []
    retry_delay: float | None = None
    for packed in status.details:
        if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            packed.Unpack(info)
            reason = _reason(info)
            metadata = dict(info.metadata)
        elif packed.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            packed.Unpack(bad)
            violations += [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif packed.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
            failure = error_details_pb2.PreconditionFailure()
            packed.Unpack(failure)
            preconditions += [PreconditionViolation(v.type, v.subject, v.description) for v in failure.violations]
        elif packed.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            packed.Unpack(retry)
            retry_delay = retry.retry_delay.ToNanoseconds() / 1e9
    if cls is ResourceExhaustedError and reason in _BUDGET_REASONS:
        cls = BudgetExceededError
    return cls(
        status.message or message, reason=reason, metadata=metadata, field_violations=violations,
        precondition_violations=preconditions, retry_delay=retry_delay, status=status,
    )


def _reason(info: error_details_pb2.ErrorInfo) -> ErrorReason | str | None:
    name, domain = str(info.reason), str(info.domain)
    if not name:
        return None
    if domain == ERROR_DOMAIN and name in ErrorReason.keys():
        return reason_of(name)
    return name
