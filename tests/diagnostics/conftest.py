"""Fixtures of the diagnostics tests: the real service pair in this process
(both on 127.0.0.1:0, dev mTLS certificates), stubs for an agent and for
the context service's own identity on the cache service."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.server import GrpcServer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import spans
from tests.support.servers import cache_settings, context_settings, secure_channel, start_cache, start_context


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    return spans.span_exporter()


@dataclass
class Pair:
    context: GrpcServer
    cache: GrpcServer | None
    agent: context_service_pb2_grpc.ContextServiceStub
    # The cache service as the context service sees it (its client identity).
    cache_stub: cache_service_pb2_grpc.CacheServiceStub | None
    context_port: int
    cache_port: int
    closers: list[Callable[[], Any]]

    async def stop_cache(self) -> None:
        if self.cache is not None:
            await self.cache.stop(0)
            self.cache = None


@pytest.fixture
async def pair_factory(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    """``await pair_factory(context={...}, cache={...}, with_cache=True)``."""
    made: list[Pair] = []

    async def make(*, context: dict[str, Any] | None = None, cache: dict[str, Any] | None = None,
                   with_cache: bool = True) -> Pair:
        n = len(made)
        cache_server = cache_stub = None
        cache_port = 1  # nothing listens there: "unreachable"
        closers: list[Callable[[], Any]] = []
        if with_cache:
            cache_server = await start_cache(cache_settings(certs_dir, tmp_path / f"pair{n}", **(cache or {})))
            cache_port = cache_server.port
            cache_channel = secure_channel(cache_port, certs_dir, client="context-client")
            closers.append(cache_channel.close)
            cache_stub = cache_service_pb2_grpc.CacheServiceStub(cache_channel)
        ctx = await start_context(context_settings(
            certs_dir, tmp_path / f"pair{n}", cache_target=f"127.0.0.1:{cache_port}", cache_timeout_s=5.0,
            **(context or {}),
        ))
        channel = secure_channel(ctx.port, certs_dir)
        closers.append(channel.close)
        pair = Pair(ctx, cache_server, context_service_pb2_grpc.ContextServiceStub(channel), cache_stub,
                    ctx.port, cache_port, closers)
        made.append(pair)
        return pair

    yield make
    for pair in made:
        for close in pair.closers:
            await close()
        await pair.context.stop(0)
        await pair.stop_cache()


@pytest.fixture
async def pair(pair_factory: Callable[..., Any]) -> Pair:
    return await pair_factory()
