"""CacheService servicer: proto <-> domain conversion only. Domain errors
(AgentCtxError) become rich statuses in the shared ErrorInterceptor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx_common.errors import FieldViolation, InvalidArgument
from cache_service.api import convert
from cache_service.api.content_memo import ContentMemo
from cache_service.app import CacheApp
from cache_service.domain import embedding
from cache_service.domain.call_lease import CallLease, CallLeases
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.model import BypassReason, CacheInfo, CacheState, ModelCall
from cache_service.domain.ports import LeaseRejected
from cache_service.domain.routing import ProviderRouter

# The servicer reads only deadlines from its context.
Context = grpc.aio.ServicerContext[Any, Any]


class CacheServicer(cache_service_pb2_grpc.CacheServiceServicer):
    def __init__(self, app: CacheApp, router: ProviderRouter) -> None:
        self.app = app
        # The provider of a scope that names none, by its model (built by the composition root).
        self.router = router
        # One memo for both calls of a turn (AcquireLease, GenerateContent).
        self.contents = ContentMemo(app.settings.content_memo_bytes)
        # GenerateContent with ``acquire``: lease, call and release in one.
        self.call_leases = CallLeases(app.registry, app.generator, app.settings.bytes_per_token)

    async def AcquireLease(self, request: pb.AcquireLeaseRequest, context: Context) -> pb.AcquireLeaseResponse:
        scope = convert.scope_from_proto(request.scope, self.router)
        ttl = convert.ttl_seconds(request)
        request_tokens = _request_tokens(request)
        registry = self.app.registry
        registry.check_scope(scope)
        registry.provider(scope.provider)
        response = pb.AcquireLeaseResponse()
        # The proto encoding is smaller than the canonical JSON, so a prefix
        # over the bound here is over it there: skip hashing it at all.
        if request.prefix.ByteSize() > self.app.settings.max_prefix_bytes:
            convert.info_to_proto(
                CacheInfo(state=CacheState.BYPASS, bypass_reason=BypassReason.CAPACITY,
                          scope_fingerprint=scope.fingerprint),
                response.metadata,
            )
            return response
        prefix = convert.prefix_from_proto(request.prefix, scope.model, self.contents)
        view = PrefixView.of(prefix, self.app.settings.bytes_per_token)
        remaining = context.time_remaining()
        deadline = self.app.clock.monotonic() + remaining if remaining is not None else None
        result = await registry.acquire(scope, view, ttl, deadline, request.holder, request_tokens)
        response.lease = result.lease
        convert.info_to_proto(result.info, response.metadata)
        return response

    async def ResolveLease(self, request: pb.ResolveLeaseRequest, context: Context) -> pb.ResolveLeaseResponse:
        try:
            entry, claims = await self.app.registry.resolve(request.lease)
        except LeaseRejected as exc:
            return pb.ResolveLeaseResponse(valid=False, invalid_reason=exc.invalid_reason)
        response = pb.ResolveLeaseResponse(valid=True)
        convert.info_to_proto(self.app.registry.info(entry, CacheState(claims.state)), response.metadata)
        return response

    async def ReleaseLease(self, request: pb.ReleaseLeaseRequest, context: Context) -> pb.ReleaseLeaseResponse:
        return pb.ReleaseLeaseResponse(released=await self.app.registry.release(request.lease))

    async def GenerateContent(self, request: pb.GenerateContentRequest, context: Context) -> pb.GenerateContentResponse:
        scope, call, spec = self._call(request)
        if spec is not None:
            reply, info = await self.call_leases.generate(scope, call, spec, context.time_remaining())
        else:
            reply, info = await self.app.generator.generate(scope, call, request.lease, context.time_remaining())
        response = pb.GenerateContentResponse()
        convert.reply_to_proto(reply, response.response)
        convert.info_to_proto(info, response.cache)
        return response

    async def StreamGenerateContent(self, request: pb.StreamGenerateContentRequest,
                                    context: Context) -> AsyncIterator[pb.StreamGenerateContentResponse]:
        scope, call, spec = self._call(request.call)
        remaining = context.time_remaining()
        chunks = (self.call_leases.stream(scope, call, spec, remaining) if spec is not None
                  else self.app.generator.stream(scope, call, request.call.lease, remaining))
        async for chunk, info in chunks:
            out = pb.StreamGenerateContentResponse()
            convert.reply_to_proto(chunk, out.chunk)
            if info is not None:
                convert.info_to_proto(info, out.cache)
            yield out

    async def InvalidateScope(self, request: pb.InvalidateScopeRequest, context: Context) -> pb.InvalidateScopeResponse:
        scope = convert.scope_from_proto(request.scope, self.router)
        removed, cancelled = await self.app.registry.invalidate(scope)
        return pb.InvalidateScopeResponse(entries_removed=removed, inflight_cancelled=cancelled,
                                          scope_fingerprint=scope.fingerprint)

    async def GetScopeStatus(self, request: pb.GetScopeStatusRequest, context: Context) -> pb.GetScopeStatusResponse:
        scope = convert.scope_from_proto(request.scope, self.router)
        status = await self.app.registry.status(scope)
        return pb.GetScopeStatusResponse(
            scope_fingerprint=status.scope_fingerprint, entry_count=status.entry_count,
            inflight_count=status.inflight_count, waiter_count=status.waiter_count, prefix_bytes=status.prefix_bytes,
        )

    async def Embed(self, request: pb.EmbedRequest, context: Context) -> pb.EmbedResponse:
        provider_name, call = convert.embed_from_proto(request, self.router)
        provider = self.app.registry.provider(provider_name)
        remaining = context.time_remaining()
        limit = self.app.generator.request_timeout_s
        timeout = limit if remaining is None else max(0.0, min(remaining, limit))
        return convert.embeddings_to_proto(call.model, await embedding.embed(provider, call, timeout))

    def _call(self, request: pb.GenerateContentRequest) -> tuple[Scope, ModelCall, CallLease | None]:
        call = convert.call_from_proto(request.request, self.contents)
        spec = convert.call_lease_from_proto(request, len(call.contents))
        scope = convert.scope_from_proto(request.scope, self.router, model=call.model,
                                         require_identity=bool(request.lease) or spec is not None)
        self.app.registry.provider(scope.provider)
        return scope, call, spec


def _request_tokens(r: pb.AcquireLeaseRequest) -> int:
    """The whole request's estimated size, 0 when the caller gave none
    (the policy then judges the floor on the prefix alone)."""
    if not r.HasField("request_tokens"):
        return 0
    if r.request_tokens < 0:
        raise InvalidArgument.fields([FieldViolation("request_tokens", "must not be negative")])
    return r.request_tokens
