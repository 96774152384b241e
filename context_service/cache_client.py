"""The context service's client of the cache service (mTLS, always).

One channel per process, opened on first use. Every call carries the
caller's remaining deadline (capped by ``cache_timeout_s``) and the trace
context; a failed call is rebuilt into the AgentCtxError the cache service
raised, so callers act on its reason (CONTEXT_WINDOW_EXCEEDED, ...).
Cancelling the awaiting task cancels the RPC.

A transport failure (the service down, restarting or unreachable) is
UNAVAILABLE with reason Reason.CACHE_SERVICE_UNAVAILABLE and RetryInfo. The
channel's reconnect backoff is capped at ``_MAX_RECONNECT_BACKOFF_MS``, so a
restarted cache service is used again within about a second, without
operator action (gRPC's default cap is two minutes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from agentctx.cache.v1 import cache_service_pb2, cache_service_pb2_grpc
from agentctx_common.errors import DeadlineExceeded, FailedPrecondition, Unavailable
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc, status_from_rpc
from agentctx_common.telemetry import outgoing_metadata
from agentctx_common.tls import channel_credentials
from context_service.settings import ContextSettings

_INITIAL_RECONNECT_BACKOFF_MS = 100
_MAX_RECONNECT_BACKOFF_MS = 1000


class CacheClient:
    def __init__(self, settings: ContextSettings) -> None:
        self._settings = settings
        self._channel: grpc.aio.Channel | None = None
        self._stub: cache_service_pb2_grpc.CacheServiceStub | None = None
        self._lock = asyncio.Lock()

    async def _get_stub(self) -> cache_service_pb2_grpc.CacheServiceStub:
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
                    ],
                )
                self._stub = cache_service_pb2_grpc.CacheServiceStub(self._channel)
        return self._stub

    def timeout(self, remaining: float | None) -> float:
        """The deadline for one call: the caller's remaining time, never more
        than ``cache_timeout_s``."""
        cap = self._settings.cache_timeout_s
        return cap if remaining is None else max(0.0, min(cap, remaining))

    async def _call(self, method: str, request: Any, remaining: float | None) -> Any:
        stub = await self._get_stub()
        timeout = self.timeout(remaining)
        if timeout <= 0:
            raise DeadlineExceeded("no time left to call the cache service", reason=Reason.DEADLINE_EXCEEDED)
        try:
            return await getattr(stub, method)(request, timeout=timeout, metadata=outgoing_metadata())
        except grpc.aio.AioRpcError as err:
            raise _rebuilt(err) from None

    async def _stream(self, method: str, request: Any, remaining: float | None) -> AsyncIterator[Any]:
        stub = await self._get_stub()
        timeout = self.timeout(remaining)
        if timeout <= 0:
            raise DeadlineExceeded("no time left to call the cache service", reason=Reason.DEADLINE_EXCEEDED)
        call = getattr(stub, method)(request, timeout=timeout, metadata=outgoing_metadata())
        try:
            async for item in call:
                yield item
        except grpc.aio.AioRpcError as err:
            raise _rebuilt(err) from None
        finally:
            # A consumer that stops early (the agent went away) ends the RPC.
            call.cancel()

    async def acquire_lease(
        self, request: cache_service_pb2.AcquireLeaseRequest, *, remaining: float | None = None
    ) -> cache_service_pb2.AcquireLeaseResponse:
        return await self._call("AcquireLease", request, remaining)

    async def release_lease(self, lease: str, *, remaining: float | None = None) -> bool:
        response = await self._call("ReleaseLease", cache_service_pb2.ReleaseLeaseRequest(lease=lease), remaining)
        return response.released

    def stream_generate_content(
        self, request: cache_service_pb2.GenerateContentRequest, *, remaining: float | None = None
    ) -> AsyncIterator[cache_service_pb2.StreamGenerateContentResponse]:
        """The chunks as they arrive; errors as for unary calls."""
        return self._stream(
            "StreamGenerateContent", cache_service_pb2.StreamGenerateContentRequest(call=request), remaining
        )

    async def generate_content(
        self, request: cache_service_pb2.GenerateContentRequest, *, remaining: float | None = None
    ) -> cache_service_pb2.GenerateContentResponse:
        return await self._call("GenerateContent", request, remaining)

    async def get_scope_status(
        self, scope: cache_service_pb2.CacheScope, *, remaining: float | None = None
    ) -> cache_service_pb2.GetScopeStatusResponse:
        return await self._call("GetScopeStatus", cache_service_pb2.GetScopeStatusRequest(scope=scope), remaining)

    async def invalidate_scope(
        self, scope: cache_service_pb2.CacheScope, *, remaining: float | None = None
    ) -> cache_service_pb2.InvalidateScopeResponse:
        return await self._call("InvalidateScope", cache_service_pb2.InvalidateScopeRequest(scope=scope), remaining)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None


def _rebuilt(err: grpc.aio.AioRpcError) -> Exception:
    if err.code() is grpc.StatusCode.UNAVAILABLE and status_from_rpc(err) is None:
        # Transport failure, not an answer from the service.
        return Unavailable("the cache service is unreachable", reason=Reason.CACHE_SERVICE_UNAVAILABLE, retry_after=1.0)
    return error_from_rpc(err)
