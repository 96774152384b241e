"""A stand-in for the cache service that records what reaches it (the
deadline left, the trace metadata) and can stop answering, for what the
real one cannot be made to do on cue: hang past a deadline, or be a
version that lacks some methods (``start_recording_cache(methods=...)``
serves only those, and gRPC answers UNIMPLEMENTED for the rest)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Collection
from dataclasses import dataclass, field

import grpc

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.type.v1 import cache_pb2, content_pb2, generation_pb2
from agentctx_common.tls import server_credentials


@dataclass
class Seen:
    method: str
    time_remaining: float | None
    metadata: dict[str, str]


@dataclass
class RecordingCache(cache_service_pb2_grpc.CacheServiceServicer):
    seen: list[Seen] = field(default_factory=list)
    calls: list[cpb.GenerateContentRequest] = field(default_factory=list)
    hang: bool = False
    lease: str = ""  # the token AcquireLease grants ("" : none)
    # Whether GenerateContent honours ``acquire`` (a version that leases in
    # the call): it then records a HIT; otherwise it says nothing of the cache.
    leases_in_call: bool = False

    async def _enter(self, method: str, context: grpc.aio.ServicerContext) -> None:
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        self.seen.append(Seen(method, context.time_remaining(), metadata))
        if self.hang:
            await asyncio.Event().wait()

    async def AcquireLease(self, request, context):  # type: ignore[no-untyped-def]
        await self._enter("AcquireLease", context)
        if self.lease:
            return cpb.AcquireLeaseResponse(lease=self.lease, metadata=cache_pb2.CacheMetadata(
                state=cache_pb2.CACHE_STATE_HIT, scope_fingerprint=SCOPE_FINGERPRINT,
            ))
        return cpb.AcquireLeaseResponse(metadata=cache_pb2.CacheMetadata(
            state=cache_pb2.CACHE_STATE_BYPASS, bypass_reason=cache_pb2.CACHE_BYPASS_REASON_FIRST_SIGHTING,
        ))

    async def ReleaseLease(self, request, context):  # type: ignore[no-untyped-def]
        await self._enter("ReleaseLease", context)
        return cpb.ReleaseLeaseResponse(released=True)

    async def GetScopeStatus(self, request, context):  # type: ignore[no-untyped-def]
        await self._enter("GetScopeStatus", context)
        return cpb.GetScopeStatusResponse(scope_fingerprint=SCOPE_FINGERPRINT, entry_count=1)

    async def InvalidateScope(self, request, context):  # type: ignore[no-untyped-def]
        await self._enter("InvalidateScope", context)
        return cpb.InvalidateScopeResponse(scope_fingerprint=SCOPE_FINGERPRINT, entries_removed=1)

    async def GenerateContent(self, request, context):  # type: ignore[no-untyped-def]
        await self._enter("GenerateContent", context)
        self.calls.append(request)
        return cpb.GenerateContentResponse(response=_answer(), cache=self._record(request))

    async def StreamGenerateContent(self, request, context):  # type: ignore[no-untyped-def]
        await self._enter("StreamGenerateContent", context)
        self.calls.append(request.call)
        yield cpb.StreamGenerateContentResponse(chunk=_answer(), cache=self._record(request.call))

    def _record(self, call: cpb.GenerateContentRequest) -> cache_pb2.CacheMetadata | None:
        if self.leases_in_call and call.HasField("acquire"):
            return cache_pb2.CacheMetadata(state=cache_pb2.CACHE_STATE_HIT, scope_fingerprint=SCOPE_FINGERPRINT)
        return None


def _answer() -> generation_pb2.ModelResponse:
    return generation_pb2.ModelResponse(
        content=content_pb2.Content(role="model", parts=[content_pb2.Part(text="recorded")]),
        finish_reason=generation_pb2.FINISH_REASON_STOP,
        usage=generation_pb2.Usage(prompt_tokens=10, output_tokens=1, total_tokens=11),
    )


SCOPE_FINGERPRINT = "5c" * 32
SERVICE = cpb.DESCRIPTOR.services_by_name["CacheService"]


def _handlers(servicer: RecordingCache, methods: Collection[str]) -> grpc.GenericRpcHandler:
    """A handler for ``methods`` only, as a server of a version without the
    others has: gRPC answers those UNIMPLEMENTED ("Method not found")."""
    handlers = {}
    for method in SERVICE.methods:
        if method.name not in methods:
            continue
        request = getattr(cpb, method.input_type.name)
        response = getattr(cpb, method.output_type.name)
        make = grpc.unary_stream_rpc_method_handler if method.server_streaming else grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=request.FromString, response_serializer=response.SerializeToString,
        )
    assert set(handlers) == set(methods), f"unknown methods: {set(methods) - set(handlers)}"
    return grpc.method_handlers_generic_handler(SERVICE.full_name, handlers)


async def start_recording_cache(
    certs: pathlib.Path, port: int, *, methods: Collection[str] | None = None
) -> tuple[grpc.aio.Server, RecordingCache]:
    """On 127.0.0.1:``port`` with the cache service's dev certificate,
    requiring a client certificate, as the real one does; serving only
    ``methods`` when given."""
    server = grpc.aio.server()
    servicer = RecordingCache()
    if methods is None:
        cache_service_pb2_grpc.add_CacheServiceServicer_to_server(servicer, server)
    else:
        server.add_generic_rpc_handlers((_handlers(servicer, methods),))
    creds = server_credentials(certs / "cache-server.pem", certs / "cache-server.key", certs / "ca.pem", True)
    server.add_secure_port(f"127.0.0.1:{port}", creds)
    await server.start()
    return server, servicer
