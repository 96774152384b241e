"""Fixtures of the cluster tests: a private Redis key prefix per test,
cleaned up afterwards, and cache-service replicas (CacheApp) on it.

Redis down: the tests skip, or fail with AGENTCTX_REQUIRE_REDIS=1 (.ci/run
sets it)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from cache_service.app import CacheApp
from tests.cluster import support


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    if not support.available():
        if os.environ.get("AGENTCTX_REQUIRE_REDIS"):
            pytest.fail("Redis is required (AGENTCTX_REQUIRE_REDIS) but not reachable on 127.0.0.1:6379")
        pytest.skip("Redis is not reachable on 127.0.0.1:6379")
    prefix = support.new_prefix()
    yield prefix
    support.delete_prefix(prefix)
    support.delete_prefix(support.sim_prefix(prefix))


@pytest.fixture
def private_redis(redis_prefix: str) -> Iterator[support.PrivateRedis]:
    """A redis-server of this test's own, started; to kill and restart."""
    server = support.PrivateRedis()
    server.start()
    yield server
    server.kill()


@pytest.fixture
async def replicas(certs_dir: pathlib.Path, tmp_path: pathlib.Path,
                   redis_prefix: str) -> AsyncIterator[Callable[..., Any]]:
    """``await replicas(n, **settings)``: n started CacheApps sharing the prefix."""
    made: list[CacheApp] = []

    async def make(n: int = 1, **overrides: Any) -> list[CacheApp]:
        apps = []
        for _ in range(n):
            settings = support.replica_settings(certs_dir, tmp_path / f"r{len(made)}", redis_prefix, **overrides)
            app = await CacheApp.create(settings)
            app.start()
            made.append(app)
            apps.append(app)
        return apps

    yield make
    for app in made:
        await app.close()
