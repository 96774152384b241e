"""CacheService servicer: not implemented yet; arrives with issue #6."""

from __future__ import annotations

from typing import Any

from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx_common.errors import Unimplemented
from cache_service.app import CacheApp

_LATER = "is not implemented yet (issue #6, cache service)"


class CacheServicer(cache_service_pb2_grpc.CacheServiceServicer):
    def __init__(self, app: CacheApp) -> None:
        self.app = app

    async def AcquireLease(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"AcquireLease {_LATER}")

    async def ResolveLease(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"ResolveLease {_LATER}")

    async def ReleaseLease(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"ReleaseLease {_LATER}")

    async def GenerateContent(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"GenerateContent {_LATER}")

    async def StreamGenerateContent(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"StreamGenerateContent {_LATER}")
        yield  # an async generator, like every streaming handler

    async def InvalidateScope(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"InvalidateScope {_LATER}")

    async def GetScopeStatus(self, request: Any, context: Any) -> Any:
        raise Unimplemented(f"GetScopeStatus {_LATER}")
