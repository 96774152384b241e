"""Caller authorization by certificate identity."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import grpc

from agentctx_common.errors import PermissionDenied, Unauthenticated
from agentctx_common.reasons import Reason
from agentctx_common.status import WrappingInterceptor, abort, stream_items, wrap_handler
from agentctx_common.tls import peer_identities

# Probes need a verified certificate, not an allowlisted one. Reflection is
# not open: the schema is answered only to allowed callers.
OPEN_SERVICES = ("/grpc.health.v1.Health/",)


class AllowlistInterceptor(WrappingInterceptor):
    """Admits only callers whose certificate carries an allowed identity.

    No identity: UNAUTHENTICATED. An identity not on the list:
    PERMISSION_DENIED. Deny by default, reflection included; only health is
    open to any caller that passed the TLS handshake (probes).
    """

    def __init__(self, allowed: Collection[str]) -> None:
        super().__init__()
        self._allowed = frozenset(allowed)

    async def _check(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        identities = peer_identities(context)
        if not identities:
            await abort(context, Unauthenticated("a client certificate is required", reason=Reason.NO_CLIENT_IDENTITY))
        if identities.isdisjoint(self._allowed):
            await abort(context, PermissionDenied("caller identity is not allowed", reason=Reason.IDENTITY_NOT_ALLOWED))

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        if method.startswith(OPEN_SERVICES):
            return handler
        check = self._check

        def wrap(behavior: Any) -> Any:
            if handler.response_streaming:

                async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                    await check(context)
                    async for item in stream_items(behavior, request, context):
                        yield item

                return streaming

            async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                await check(context)
                return await behavior(request, context)

            return unary

        return wrap_handler(handler, wrap)
