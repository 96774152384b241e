"""The context service's client of the cache service (mTLS, always): the
adapter behind ``ports.CachePort``, domain types in and out, mapped here
(``mapping.cache_calls``).

One channel per process, opened on first use. Every call carries the
caller's remaining deadline (capped by ``cache_timeout_s``) and the trace
context; a failed call is rebuilt into the AgentCtxError the cache service
raised, so callers act on its reason (CONTEXT_WINDOW_EXCEEDED, ...).
Cancelling the awaiting task cancels the RPC.

A transport failure (the service down, restarting or unreachable) is
UNAVAILABLE with reason CACHE_SERVICE_UNAVAILABLE and RetryInfo. The
channel's reconnect backoff is capped at ``_MAX_RECONNECT_BACKOFF_MS``, so a
restarted cache service is used again within about a second, without
operator action (gRPC's default cap is two minutes).

A method the cache service does not implement (an older or newer version,
or another service at ``cache_target``) is FAILED_PRECONDITION
CACHE_SERVICE_INCOMPATIBLE naming the method.

``cache_target`` may name several cache replicas (``dns:///cache.internal:50052``,
or ``ipv4:10.0.0.1:50052,10.0.0.2:50052``): calls are balanced over them
round-robin, and a replica whose health check (grpc.health.v1, the cache
service's name) fails or goes away leaves the rotation, so it costs at most
the call in flight on it, which the turn already retries.

A request the cache service could not decode (MALFORMED_REQUEST) was
built here from the session and the call, not sent by the agent as is: it
is FAILED_PRECONDITION CACHE_REQUEST_UNDECODABLE for the agent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx_common.errors import Code, DeadlineExceeded, FailedPrecondition, Unavailable
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc, status_from_rpc
from agentctx_common.telemetry import outgoing_metadata
from agentctx_common.tls import channel_credentials
from context_service.building.types import BuiltContext
from context_service.domain.cache_calls import CacheScope, LeaseRequest, ModelReply, ScopeInvalidation, ScopeStatus
from context_service.mapping.build_context import model_request_chunks
from context_service.mapping.cache_calls import reply_from_proto, scope_to_proto
from context_service.mapping.wire import field_head, wire_field
from context_service.settings import ContextSettings

Stub = cache_service_pb2_grpc.CacheServiceStub
_SERVICE = cpb.DESCRIPTOR.services_by_name["CacheService"].full_name
# Field numbers of the messages a turn's call is assembled from as bytes.
_REQUEST_FIELD = cpb.GenerateContentRequest.DESCRIPTOR.fields_by_name["request"].number
_CALL_FIELD = cpb.StreamGenerateContentRequest.DESCRIPTOR.fields_by_name["call"].number
_INITIAL_RECONNECT_BACKOFF_MS = 100
_MAX_RECONNECT_BACKOFF_MS = 1000
# Balance over every address the target resolves to; skip unhealthy replicas.
SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"round_robin": {}}],
    "healthCheckConfig": {"serviceName": _SERVICE},
})


class CacheClient:
    def __init__(self, settings: ContextSettings) -> None:
        self._settings = settings
        self._channel: grpc.aio.Channel | None = None
        self._stub: Stub | None = None
        # GenerateContent and StreamGenerateContent taking their request
        # already serialized (``call_request``): bytes pass through.
        self._wire: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    async def _get_stub(self) -> Stub:
        if self._stub is not None:
            return self._stub
        async with self._lock:
            if self._stub is None:
                s = self._settings
                if s.cache_ca is None or s.cache_cert is None or s.cache_key is None:
                    raise FailedPrecondition(
                        "the cache service is not configured (cache_ca, cache_cert and cache_key are required)",
                        reason=Reason.CACHE_SERVICE_NOT_CONFIGURED,
                    )
                creds = channel_credentials(s.cache_ca, s.cache_cert, s.cache_key)
                self._channel = grpc.aio.secure_channel(
                    s.cache_target,
                    creds,
                    options=[
                        ("grpc.ssl_target_name_override", s.cache_server_name),
                        ("grpc.max_receive_message_length", s.max_message_bytes),
                        ("grpc.max_send_message_length", s.max_message_bytes),
                        ("grpc.initial_reconnect_backoff_ms", _INITIAL_RECONNECT_BACKOFF_MS),
                        ("grpc.min_reconnect_backoff_ms", _INITIAL_RECONNECT_BACKOFF_MS),
                        ("grpc.max_reconnect_backoff_ms", _MAX_RECONNECT_BACKOFF_MS),
                        ("grpc.service_config", SERVICE_CONFIG),
                    ],
                )
                self._wire = {
                    "GenerateContent": self._channel.unary_unary(
                        f"/{_SERVICE}/GenerateContent", request_serializer=None,
                        response_deserializer=cpb.GenerateContentResponse.FromString),
                    "StreamGenerateContent": self._channel.unary_stream(
                        f"/{_SERVICE}/StreamGenerateContent", request_serializer=None,
                        response_deserializer=cpb.StreamGenerateContentResponse.FromString),
                }
                # The generated gRPC module has no type stubs.
                self._stub = Stub(self._channel)
        return self._stub

    def timeout(self, remaining: float | None) -> float:
        """The deadline for one call: the caller's remaining time, never more
        than ``cache_timeout_s``."""
        cap = self._settings.cache_timeout_s
        return cap if remaining is None else max(0.0, min(cap, remaining))

    async def _call(self, method: str, request: Any, remaining: float | None, *, wire: bool = False) -> Any:
        """``method`` of the cache service (its name in the proto); with
        ``wire``, ``request`` is the serialized message."""
        stub = await self._get_stub()
        timeout = self.timeout(remaining)
        if timeout <= 0:
            raise DeadlineExceeded("no time left to call the cache service", reason=Reason.DEADLINE_EXCEEDED)
        send = self._wire[method] if wire else getattr(stub, method)
        try:
            return await send(request, timeout=timeout, metadata=outgoing_metadata())
        except grpc.aio.AioRpcError as err:
            raise _rebuilt(err, method) from None

    async def _stream(self, request: bytes, remaining: float | None) -> AsyncIterator[cpb.StreamGenerateContentResponse]:
        """StreamGenerateContent of a serialized StreamGenerateContentRequest."""
        await self._get_stub()
        timeout = self.timeout(remaining)
        if timeout <= 0:
            raise DeadlineExceeded("no time left to call the cache service", reason=Reason.DEADLINE_EXCEEDED)
        call = self._wire["StreamGenerateContent"](request, timeout=timeout, metadata=outgoing_metadata())
        try:
            async for item in call:
                yield item
        except grpc.aio.AioRpcError as err:
            raise _rebuilt(err, "StreamGenerateContent") from None
        finally:
            # A consumer that stops early (the agent went away) ends the RPC.
            call.cancel()

    # --- ports.CachePort ------------------------------------------------------

    async def generate(
        self, scope: CacheScope, request: BuiltContext, *, acquire: LeaseRequest | None = None,
        remaining: float | None = None,
    ) -> ModelReply:
        answer: cpb.GenerateContentResponse = await self._call(
            "GenerateContent", call_request(scope, request, acquire), remaining, wire=True)
        return reply_from_proto(answer.response, answer.cache if answer.HasField("cache") else None)

    async def stream_generate(
        self, scope: CacheScope, request: BuiltContext, *, acquire: LeaseRequest | None = None,
        remaining: float | None = None,
    ) -> AsyncIterator[ModelReply]:
        call = wire_field(_CALL_FIELD, call_request(scope, request, acquire))
        async for item in self._stream(call, remaining):
            yield reply_from_proto(item.chunk, item.cache if item.HasField("cache") else None)

    async def scope_status(self, scope: CacheScope, *, remaining: float | None = None) -> ScopeStatus:
        status: cpb.GetScopeStatusResponse = await self._call(
            "GetScopeStatus", cpb.GetScopeStatusRequest(scope=scope_to_proto(scope)), remaining
        )
        return ScopeStatus(status.scope_fingerprint, status.entry_count, status.inflight_count, status.waiter_count)

    async def invalidate_scope(self, scope: CacheScope, *, remaining: float | None = None) -> ScopeInvalidation:
        done: cpb.InvalidateScopeResponse = await self._call(
            "InvalidateScope", cpb.InvalidateScopeRequest(scope=scope_to_proto(scope)), remaining
        )
        return ScopeInvalidation(done.scope_fingerprint, done.entries_removed, done.inflight_cancelled)

    # --- ports.EmbeddingPort ------------------------------------------------------

    async def embed(self, provider: str, model: str, texts: Sequence[str], *, query: bool,
                    dimensions: int | None = None, remaining: float | None = None) -> list[list[float]]:
        task = cpb.EMBED_TASK_RETRIEVAL_QUERY if query else cpb.EMBED_TASK_RETRIEVAL_DOCUMENT
        answer: cpb.EmbedResponse = await self._call("Embed", cpb.EmbedRequest(
            provider=provider, model=model, texts=list(texts), task=task, dimensions=dimensions or 0), remaining)
        return [list(e.values) for e in answer.embeddings]

    # --- for the MODEL compactor, an adapter itself ----------------------------

    async def generate_content(
        self, request: cpb.GenerateContentRequest, *, remaining: float | None = None
    ) -> cpb.GenerateContentResponse:
        return await self._call("GenerateContent", request, remaining)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None


def call_request(scope: CacheScope, request: BuiltContext, acquire: LeaseRequest | None) -> bytes:
    """The serialized GenerateContentRequest of a turn: scope and acquire
    encoded here, the model request joined from the records' cached wire
    bytes (``model_request_chunks``, joined once), so the history is neither copied into
    a message nor serialized again. Fields in any order parse alike."""
    call = cpb.GenerateContentRequest(scope=scope_to_proto(scope))
    if acquire is not None:
        call.acquire.suffix_contents = acquire.suffix
        call.acquire.holder = acquire.holder
        if acquire.ttl_s is not None:
            call.acquire.ttl.FromNanoseconds(int(acquire.ttl_s * 1e9))
    chunks = model_request_chunks(request)
    return b"".join([call.SerializeToString(), field_head(_REQUEST_FIELD, sum(map(len, chunks))), *chunks])


def _rebuilt(err: grpc.aio.AioRpcError, method: str) -> Exception:
    if err.code() is grpc.StatusCode.UNAVAILABLE and status_from_rpc(err) is None:
        # Transport failure, not an answer from the service.
        return Unavailable("the cache service is unreachable", reason=Reason.CACHE_SERVICE_UNAVAILABLE, retry_after=1.0)
    error = error_from_rpc(err)
    if error.code is Code.UNIMPLEMENTED and error.reason is Reason.UNIMPLEMENTED:
        # gRPC's answer for a method the server does not have: a cache
        # service of another version (or another service at cache_target).
        return FailedPrecondition(
            f"the cache service does not implement {method}: it runs a version without it, "
            "or cache_target names another service",
            reason=Reason.CACHE_SERVICE_INCOMPATIBLE, metadata={"method": method},
        )
    if error.reason is Reason.MALFORMED_REQUEST:
        return FailedPrecondition(
            "the cache service could not decode the model request built from this session and call: "
            "content nests too deeply (stored before max_json_depth applied, or in tool declarations)",
            reason=Reason.CACHE_REQUEST_UNDECODABLE,
        )
    return error
