"""A real grpc.aio ContextService on 127.0.0.1:0 whose calls fail as a test
scripts them (rich google.rpc.Status details included), for the client's
error decoding and retry policy. It records every request it receives."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2

DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class Failure:
    """One scripted failure: a code, a message and the details to attach."""

    code: grpc.StatusCode
    message: str = "scripted failure"
    reason: str = ""
    domain: str = "agentctx.dev"
    metadata: dict[str, str] = field(default_factory=dict)
    retry_delay: float | None = None
    field_violations: tuple[tuple[str, str], ...] = ()
    rich: bool = True

    def status(self) -> status_pb2.Status:
        status = status_pb2.Status(code=getattr(code_pb2, self.code.name), message=self.message)
        details: list[Any] = []
        if self.reason:
            details.append(error_details_pb2.ErrorInfo(reason=self.reason, domain=self.domain, metadata=self.metadata))
        if self.field_violations:
            details.append(error_details_pb2.BadRequest(field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=f, description=d) for f, d in self.field_violations
            ]))
        if self.retry_delay is not None:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(int(self.retry_delay * 1e9))
            details.append(error_details_pb2.RetryInfo(retry_delay=delay))
        for detail in details:
            packed = any_pb2.Any()
            packed.Pack(detail)
            status.details.append(packed)
        return status

    async def abort(self, context: grpc.aio.ServicerContext) -> None:
        trailing = ((DETAILS_KEY, self.status().SerializeToString()),) if self.rich else ()
        await context.abort(self.code, self.message, trailing_metadata=trailing)


def reply_to(request: pb.GenerateRequest) -> pb.GenerateResponse:
    """The stored reply a real service would send: it has the reply id."""
    return pb.GenerateResponse(reply=event_pb2.Event(
        id=request.reply_event_id, author="model", invocation_id=request.invocation_id, sequence=2,
        content=content_pb2.Content(role="model", parts=[content_pb2.Part(text="done")]),
    ))


class ScriptedContextService(context_service_pb2_grpc.ContextServiceServicer):
    """Each RPC pops the next scripted failure of its method, if any, and
    otherwise succeeds; ``stream_fail_after_chunk`` breaks a stream after
    its first chunk."""

    def __init__(self) -> None:
        self.failures: dict[str, list[Failure]] = {}
        self.requests: dict[str, list[Any]] = {}
        self.stream_fail_after_chunk: Failure | None = None

    def fail(self, method: str, *failures: Failure) -> None:
        self.failures.setdefault(method, []).extend(failures)

    async def _enter(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> None:
        copy = type(request)()
        copy.CopyFrom(request)
        self.requests.setdefault(method, []).append(copy)
        pending = self.failures.get(method)
        if pending:
            await pending.pop(0).abort(context)

    async def GetSession(self, request: pb.GetSessionRequest, context: grpc.aio.ServicerContext) -> session_pb2.Session:
        await self._enter("GetSession", request, context)
        return session_pb2.Session(name=request.name, etag="e1")

    async def AppendEvent(self, request: pb.AppendEventRequest, context: grpc.aio.ServicerContext) -> pb.AppendEventResponse:
        await self._enter("AppendEvent", request, context)
        return pb.AppendEventResponse(event=request.event, session_etag="e2")

    async def CreateSession(self, request: pb.CreateSessionRequest, context: grpc.aio.ServicerContext) -> session_pb2.Session:
        await self._enter("CreateSession", request, context)
        return session_pb2.Session(name=f"{request.parent}/sessions/s1")

    async def Generate(self, request: pb.GenerateRequest, context: grpc.aio.ServicerContext) -> pb.GenerateResponse:
        await self._enter("Generate", request, context)
        return reply_to(request)

    async def StreamGenerate(
        self, request: pb.StreamGenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamGenerateResponse]:
        await self._enter("StreamGenerate", request, context)
        yield pb.StreamGenerateResponse(chunk=event_pb2.Event(
            partial=True, content=content_pb2.Content(role="model", parts=[content_pb2.Part(text="do")])
        ))
        if self.stream_fail_after_chunk is not None:
            await self.stream_fail_after_chunk.abort(context)
        yield pb.StreamGenerateResponse(result=reply_to(request.turn))


async def start(service: ScriptedContextService) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    context_service_pb2_grpc.add_ContextServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


class ScriptedDiagnostics(ScriptedContextService):
    """The scripted service with the diagnostics RPCs: a fixed lifecycle
    view, and an invalidation that echoes the confirmed scope."""

    async def GetContextLifecycle(
        self, request: pb.GetContextLifecycleRequest, context: grpc.aio.ServicerContext
    ) -> pb.ContextLifecycle:
        await self._enter("GetContextLifecycle", request, context)
        return pb.ContextLifecycle(session=request.session, model=request.model or "m", scope_fingerprint="f" * 64,
                                   cache_service_reachable=True, cache_entry_count=2)

    async def InvalidateContextCache(
        self, request: pb.InvalidateContextCacheRequest, context: grpc.aio.ServicerContext
    ) -> pb.InvalidateContextCacheResponse:
        await self._enter("InvalidateContextCache", request, context)
        return pb.InvalidateContextCacheResponse(entries_removed=2,
                                                 scope_fingerprint=request.confirmation.scope_fingerprint)
