"""CacheService servicer: proto <-> domain conversion only. Domain errors
(AgentCtxError) become rich statuses in the shared ErrorInterceptor.

``register`` adds it to a server with the generated method handlers, but
the requests that carry a conversation (AcquireLease, GenerateContent,
StreamGenerateContent) are deserialized into a ``Received``: the message
and the bytes it was parsed from, which the content memo's keys are cut
from (``convert._content_keys``) instead of serializing the whole request
again (the largest Python-visible cost of a call at a thousand contents
before). The servicer takes the bytes once and lets them go (the memo's
run may keep them, charged); a plain message (a test calling a method
directly) is serialized as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

import grpc

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.status import wrap_handler
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
M = TypeVar("M")


class Received(Generic[M]):
    """A request and the bytes it was parsed from (taken once)."""

    __slots__ = ("_data", "message")

    def __init__(self, message: M, data: bytes) -> None:
        self.message = message
        self._data: bytes | None = data

    def take(self) -> bytes | None:
        """The bytes, the first time; the call holds them no longer."""
        data, self._data = self._data, None
        return data


def _opened(request: M | Received[M]) -> tuple[M, bytes | None]:
    if isinstance(request, Received):
        return request.message, request.take()
    return request, None


def _keeping_bytes(parse: Callable[[bytes], Any]) -> Callable[[bytes], Received[Any]]:
    def deserialize(data: bytes) -> Received[Any]:
        return Received(parse(data), data)

    return deserialize


# The methods whose requests carry contents, and their request types.
_KEEP_BYTES: dict[str, Any] = {
    "AcquireLease": pb.AcquireLeaseRequest,
    "GenerateContent": pb.GenerateContentRequest,
    "StreamGenerateContent": pb.StreamGenerateContentRequest,
}
_ACQUIRE_PREFIX = pb.AcquireLeaseRequest.DESCRIPTOR.fields_by_name["prefix"].number
_GENERATE_REQUEST = pb.GenerateContentRequest.DESCRIPTOR.fields_by_name["request"].number
_STREAM_CALL = pb.StreamGenerateContentRequest.DESCRIPTOR.fields_by_name["call"].number


class _Recorder:
    """Stands for a server to the generated registration, to take its handlers."""

    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    service = ""

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.service, self.handlers = service, handlers


def register(servicer: CacheServicer, server: Any) -> None:
    """Adds ``servicer`` to ``server`` as the generated code does, with the
    deserializers of ``_KEEP_BYTES`` keeping the request's bytes."""
    recorder = _Recorder()
    cache_service_pb2_grpc.add_CacheServiceServicer_to_server(servicer, recorder)
    handlers = dict(recorder.handlers)
    for name, kind in _KEEP_BYTES.items():
        handler = handlers[name]
        assert handler.request_deserializer == kind.FromString, name
        handlers[name] = wrap_handler(handler, lambda behavior: behavior, deserializer=_keeping_bytes(kind.FromString))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(recorder.service, handlers),))
    server.add_registered_method_handlers(recorder.service, handlers)


class CacheServicer(cache_service_pb2_grpc.CacheServiceServicer):
    def __init__(self, app: CacheApp, router: ProviderRouter) -> None:
        self.app = app
        # The provider of a scope that names none, by its model (built by the composition root).
        self.router = router
        # One memo for both calls of a turn (AcquireLease, GenerateContent).
        self.contents = ContentMemo(app.settings.content_memo_bytes)
        # GenerateContent with ``acquire``: lease, call and release in one.
        self.call_leases = CallLeases(app.registry, app.generator, app.settings.bytes_per_token)

    async def AcquireLease(self, received: pb.AcquireLeaseRequest | Received[pb.AcquireLeaseRequest],
                           context: Context) -> pb.AcquireLeaseResponse:
        request, data = _opened(received)
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
        prefix = convert.prefix_from_proto(request.prefix, scope.model, self.contents,
                                           convert.received_field(data, _ACQUIRE_PREFIX))
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

    async def GenerateContent(self, received: pb.GenerateContentRequest | Received[pb.GenerateContentRequest],
                              context: Context) -> pb.GenerateContentResponse:
        request, data = _opened(received)
        scope, call, spec = self._call(request, convert.received_field(data, _GENERATE_REQUEST))
        if spec is not None:
            reply, info = await self.call_leases.generate(scope, call, spec, context.time_remaining())
        else:
            reply, info = await self.app.generator.generate(scope, call, request.lease, context.time_remaining())
        response = pb.GenerateContentResponse()
        convert.reply_to_proto(reply, response.response)
        convert.info_to_proto(info, response.cache)
        return response

    async def StreamGenerateContent(
        self, received: pb.StreamGenerateContentRequest | Received[pb.StreamGenerateContentRequest], context: Context
    ) -> AsyncIterator[pb.StreamGenerateContentResponse]:
        request, data = _opened(received)
        scope, call, spec = self._call(request.call, convert.received_field(data, _STREAM_CALL, _GENERATE_REQUEST))
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

    def _call(self, request: pb.GenerateContentRequest,
              received: convert.Received | None) -> tuple[Scope, ModelCall, CallLease | None]:
        """``received``: where ``request.request`` lies in the bytes received."""
        call = convert.call_from_proto(request.request, self.contents, received)
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
