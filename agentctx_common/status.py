"""Mapping between AgentCtxError and rich gRPC statuses, both directions.

Servers: ``ErrorInterceptor`` turns every AgentCtxError a handler raises into
a ``google.rpc.Status`` with ErrorInfo, BadRequest, PreconditionFailure and
RetryInfo details. Anything else becomes INTERNAL with a generic message; the
exception type is logged, its text is not (it may hold content).

A request whose bytes do not decode (not protobuf, invalid UTF-8 in a
string field, nesting past the decoder's limit) is INVALID_ARGUMENT
MALFORMED_REQUEST, logged at WARNING with its size only: grpc.aio would
answer UNKNOWN with the decoder's message, before any interceptor runs.

Clients: ``error_from_rpc`` rebuilds the AgentCtxError from an AioRpcError so
callers can act on the reason (for example CONTEXT_WINDOW_EXCEEDED).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import pathlib
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from agentctx_common.errors import (
    AgentCtxError,
    Code,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
    error_class,
)
from agentctx_common.reasons import ERROR_DOMAIN, Reason

_DETAILS_KEY = "grpc-status-details-bin"
log = logging.getLogger("agentctx.errors")


def grpc_code(code: Code) -> grpc.StatusCode:
    return grpc.StatusCode[code.value]


def code_of(status: grpc.StatusCode | None) -> Code:
    """The Code of a grpc status code (UNKNOWN for OK or None: a failed call
    that claims success is not something a caller can act on)."""
    if status is None or status is grpc.StatusCode.OK:
        return Code.UNKNOWN
    return Code[status.name]


def to_status(err: AgentCtxError) -> status_pb2.Status:
    """The google.rpc.Status for an error, with every detail it carries."""
    status = status_pb2.Status(code=getattr(code_pb2, err.code.value), message=err.message)
    details: list[Any] = [
        error_details_pb2.ErrorInfo(reason=err.wire_reason, domain=ERROR_DOMAIN, metadata=err.metadata)
    ]
    if err.field_violations:
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                    for v in err.field_violations
                ]
            )
        )
    if err.precondition_violations:
        details.append(
            error_details_pb2.PreconditionFailure(
                violations=[
                    error_details_pb2.PreconditionFailure.Violation(
                        type=v.type, subject=v.subject, description=v.description
                    )
                    for v in err.precondition_violations
                ]
            )
        )
    if err.retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(err.retry_after * 1e9))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    for detail in details:
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    return status


async def abort(context: grpc.aio.ServicerContext[Any, Any], err: AgentCtxError) -> None:
    """Ends the RPC with the error's rich status (raises grpc's AbortError)."""
    status = to_status(err)
    await context.abort(
        grpc_code(err.code),
        err.message,
        trailing_metadata=((_DETAILS_KEY, status.SerializeToString()),),
    )


def end_with(context: grpc.aio.ServicerContext[Any, Any], err: AgentCtxError) -> None:
    """Sets the error's rich status on ``context`` without raising: the
    handler then returns, and gRPC ends the RPC with that status. Unlike
    ``abort`` no AbortError unwinds the interceptors' frames, so nothing
    the RPC held stays in a reference cycle with it."""
    status = to_status(err)
    context.set_code(grpc_code(err.code))
    context.set_details(err.message)
    context.set_trailing_metadata(((_DETAILS_KEY, status.SerializeToString()),))


def status_from_rpc(err: grpc.aio.AioRpcError | grpc.RpcError) -> status_pb2.Status | None:
    """The google.rpc.Status a server attached to an error, if any."""
    metadata = err.trailing_metadata() if callable(getattr(err, "trailing_metadata", None)) else None
    # Items are (key, value) pairs at run time, whatever the stubs say.
    for key, value in cast("Iterable[tuple[str, bytes]]", metadata or ()):
        if key == _DETAILS_KEY:
            status = status_pb2.Status()
            status.ParseFromString(value)
            return status
    return None


def error_from_rpc(err: grpc.aio.AioRpcError | grpc.RpcError) -> AgentCtxError:
    """Rebuilds an AgentCtxError from a failed call, details included."""
    code = code_of(err.code())
    cls = error_class(code)
    status = status_from_rpc(err)
    kwargs: dict[str, Any] = {}
    wire_reason: str | None = None
    if status is not None:
        violations: list[FieldViolation] = []
        preconditions: list[PreconditionViolation] = []
        for packed in status.details:
            if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                packed.Unpack(info)
                wire_reason = info.reason
                kwargs["metadata"] = dict(info.metadata)
            elif packed.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                packed.Unpack(bad)
                violations += [FieldViolation(v.field, v.description) for v in bad.field_violations]
            elif packed.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
                failure = error_details_pb2.PreconditionFailure()
                packed.Unpack(failure)
                preconditions += [
                    PreconditionViolation(v.type, v.subject, v.description) for v in failure.violations
                ]
            elif packed.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                packed.Unpack(retry)
                kwargs["retry_after"] = retry.retry_delay.ToNanoseconds() / 1e9
        kwargs["field_violations"] = violations
        kwargs["precondition_violations"] = preconditions
    reason = Reason[wire_reason] if wire_reason is not None and wire_reason in Reason.__members__ else None
    error = cls(err.details() or code.value, reason=reason, **kwargs)
    if wire_reason and reason is None:
        error.wire_reason = wire_reason
    return error


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """An interceptor that wraps each method's handler once and reuses the
    wrapped handler: building handlers per call would cost every RPC."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self.wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """The handler to serve ``method`` with (``handler`` to leave it as is)."""
        raise NotImplementedError


class ChainInterceptor(WrappingInterceptor):
    """Several wrapping interceptors applied as one, outermost first: gRPC
    then awaits one interceptor per call instead of one per layer."""

    def __init__(self, layers: Sequence[WrappingInterceptor]) -> None:
        super().__init__()
        self._layers = tuple(layers)

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        for layer in reversed(self._layers):
            handler = layer.wrap(method, handler)
        return handler


class ErrorInterceptor(WrappingInterceptor):
    """Turns AgentCtxError into rich statuses, undecodable requests into
    INVALID_ARGUMENT, and hides unexpected errors."""

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        return wrap_handler(
            handler,
            lambda behavior: _guard(behavior, method, handler.response_streaming, handler.request_streaming),
            deserializer=_tolerant(handler.request_deserializer),
        )


def wrap_handler(
    handler: grpc.RpcMethodHandler[Any, Any], wrap: Callable[[Any], Any], *, deserializer: Callable[[bytes], Any] | None = None
) -> grpc.RpcMethodHandler[Any, Any]:
    """A copy of ``handler`` whose behaviour function is ``wrap(behaviour)``
    (and whose request deserializer is ``deserializer``, when given)."""
    decode = deserializer or handler.request_deserializer
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(wrap(handler.unary_unary), decode, handler.response_serializer)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(wrap(handler.unary_stream), decode, handler.response_serializer)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(wrap(handler.stream_unary), decode, handler.response_serializer)
    return grpc.stream_stream_rpc_method_handler(wrap(handler.stream_stream), decode, handler.response_serializer)


class Undecodable:
    """What the tolerant deserializer hands on for bytes that do not decode:
    their size and the decoder's exception type, never the bytes or the
    decoder's message (either may quote request content)."""

    __slots__ = ("error_type", "size")

    def __init__(self, size: int, error_type: str) -> None:
        self.size = size
        self.error_type = error_type


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` returning an Undecodable instead of raising: grpc.aio
    deserializes before any behaviour runs and answers a raise with UNKNOWN."""
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # noqa: BLE001 - whatever the decoder raises, the bytes are at fault
            return Undecodable(len(data), type(exc).__name__)

    return deserialize


def _malformed(request: Undecodable, method: str) -> InvalidArgument:
    log.warning("undecodable request", extra={"rpc": method, "request_bytes": request.size,
                                               "error_type": request.error_type})
    return InvalidArgument(
        "the request is not a valid message of the method's request type",
        reason=Reason.MALFORMED_REQUEST,
        metadata={"request_bytes": str(request.size)},
    )


async def _decoded(requests: AsyncIterator[Any], method: str) -> AsyncIterator[Any]:
    """A request stream that raises MALFORMED_REQUEST at an undecodable message."""
    async for request in requests:
        if isinstance(request, Undecodable):
            raise _malformed(request, method)
        yield request


async def stream_items(behavior: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
    """Items of a response-streaming behaviour, whether it is an async
    generator or a coroutine that writes with ``context.write`` (as
    grpcio-health-checking's Watch does)."""
    result = behavior(request, context)
    if inspect.isasyncgen(result):
        async for item in result:
            yield item
    else:
        await result


def _failure(exc: BaseException, method: str) -> AgentCtxError:
    """The status an RPC's exception ends it with (logged, content-free).

    Releases the locals of every frame ``exc`` (and the exceptions chained
    to it) unwound through: an exception and its frames easily form a
    reference cycle, and what those frames held (the request, the history
    proto of a model call) would then live until the next full collection
    of the cyclic garbage collector, which counts objects, not bytes.
    """
    if isinstance(exc, AgentCtxError):
        if exc.code in (Code.INTERNAL, Code.UNAVAILABLE):
            log.warning("rpc failed", extra={"rpc": method, "code": exc.code.value, "reason": exc.reason})
        failure = exc
    else:
        # Where it failed, without the message (it may quote request content).
        where = [f"{pathlib.Path(f.filename).name}:{f.lineno}:{f.name}"
                 for f in traceback.extract_tb(exc.__traceback__)[-8:]]
        log.error("unexpected error", extra={"rpc": method, "error_type": type(exc).__name__, "where": where})
        failure = error_class(Code.INTERNAL)("internal error", reason=Reason.INTERNAL)
    _release_frames(exc)
    return failure


def _release_frames(exc: BaseException) -> None:
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)  # skips the frames still running
        e.__traceback__ = None  # nor the boundary's own frame, which holds the request
        pending += (e.__context__, e.__cause__)


def _checked(request_or_iterator: Any, method: str, request_streaming: bool) -> Any:
    if request_streaming:
        return _decoded(request_or_iterator, method)
    if isinstance(request_or_iterator, Undecodable):
        raise _malformed(request_or_iterator, method)
    return request_or_iterator


def _guard(behavior: Any, method: str, streaming: bool, request_streaming: bool) -> Any:
    # The status is set after the except block and nothing is raised: an
    # AbortError would chain the handler's exception (and its frames) again,
    # and unwind the frames of every interceptor holding the request.
    if streaming:

        async def stream_guarded(request_or_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            try:
                request_or_iterator = _checked(request_or_iterator, method, request_streaming)
                async for item in stream_items(behavior, request_or_iterator, context):
                    yield item
                return
            except (asyncio.CancelledError, grpc.aio.AbortError):
                raise
            except Exception as exc:  # noqa: BLE001 - the boundary of every RPC
                failure = _failure(exc, method)
            end_with(context, failure)

        return stream_guarded

    async def guarded(request_or_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await behavior(_checked(request_or_iterator, method, request_streaming), context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as exc:  # noqa: BLE001 - the boundary of every RPC
            failure = _failure(exc, method)
        end_with(context, failure)
        return None

    return guarded
