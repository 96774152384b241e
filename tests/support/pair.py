"""Both services in this process on 127.0.0.1 with the dev mTLS
certificates, the agent's stub, the cache service as the context service
sees it (its client identity), and the cache service's app (for its
simulator's knobs and counters).

The cache service listens on a fixed free port, so that a test can stop it
and start it again where the context service expects it.
"""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.server import GrpcServer
from cache_service.app import CacheApp
from cache_service.providers.local import LocalProvider
from cache_service.server import build_server as build_cache_server
from tests.support.processes import free_port
from tests.support.servers import cache_settings, context_settings, secure_channel, start_context


@dataclass
class ServicePair:
    certs: pathlib.Path
    tmp: pathlib.Path
    cache_port: int
    context: GrpcServer
    channel: grpc.aio.Channel
    stub: context_service_pb2_grpc.ContextServiceStub
    cache_overrides: dict[str, Any] = field(default_factory=dict)
    cache: GrpcServer | None = None
    cache_app: CacheApp | None = None
    _cache_channel: grpc.aio.Channel | None = None

    @property
    def agent(self) -> context_service_pb2_grpc.ContextServiceStub:
        return self.stub

    @property
    def context_port(self) -> int:
        return self.context.port

    @property
    def cache_stub(self) -> cache_service_pb2_grpc.CacheServiceStub:
        """The cache service, called with the context service's identity."""
        if self._cache_channel is None:
            self._cache_channel = secure_channel(self.cache_port, self.certs, client="context-client")
        return cache_service_pb2_grpc.CacheServiceStub(self._cache_channel)

    @property
    def provider(self) -> LocalProvider:
        assert self.cache_app is not None, "the cache service is not running"
        provider = self.cache_app.providers["local"]
        assert isinstance(provider, LocalProvider)
        return provider

    async def start_cache(self) -> None:
        """(Re)starts the cache service on its port, with a fresh registry."""
        settings = cache_settings(self.certs, self.tmp, port=self.cache_port, **self.cache_overrides)
        self.cache_app = await CacheApp.create(settings)
        self.cache = await build_cache_server(settings, app=self.cache_app)
        await self.cache.start()

    async def stop_cache(self) -> None:
        if self.cache is not None:
            await self.cache.stop(0)
            self.cache = None

    async def close(self) -> None:
        await self.channel.close()
        if self._cache_channel is not None:
            await self._cache_channel.close()
        await self.context.stop(0)
        await self.stop_cache()


async def start_pair(
    certs: pathlib.Path,
    tmp: pathlib.Path,
    *,
    cache: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    with_cache: bool = True,
) -> ServicePair:
    """Settings overrides for each service; ``with_cache=False`` leaves the
    cache service's port closed (start it later with ``start_cache``)."""
    tmp.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - a test fixture, before any server runs
    cache_port = free_port()
    server = await start_context(
        context_settings(certs, tmp, cache_target=f"127.0.0.1:{cache_port}", **(context or {}))
    )
    channel = secure_channel(server.port, certs)
    pair = ServicePair(certs, tmp, cache_port, server, channel,
                       context_service_pb2_grpc.ContextServiceStub(channel), dict(cache or {}))
    if with_cache:
        await pair.start_cache()
    return pair


@contextlib.asynccontextmanager
async def pair_maker(
    certs: pathlib.Path,
    tmp: pathlib.Path,
    *,
    cache_defaults: dict[str, Any] | None = None,
    context_defaults: dict[str, Any] | None = None,
) -> AsyncIterator[Callable[..., Awaitable[ServicePair]]]:
    """``make(cache={...}, context={...}, with_cache=True)`` starts a pair
    (overrides on top of the defaults); every pair is closed on exit."""
    made: list[ServicePair] = []

    async def make(*, cache: dict[str, Any] | None = None, context: dict[str, Any] | None = None,
                   with_cache: bool = True) -> ServicePair:
        pair = await start_pair(certs, tmp / f"pair-{len(made)}", cache={**(cache_defaults or {}), **(cache or {})},
                                context={**(context_defaults or {}), **(context or {})}, with_cache=with_cache)
        made.append(pair)
        return pair

    try:
        yield make
    finally:
        for pair in made:
            await pair.close()
