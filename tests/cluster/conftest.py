"""Fixtures of the cluster tests: a private Redis key prefix per test,
cleaned up afterwards, and cache-service replicas (CacheApp) on it.

``redis_backend``: the single Redis, and for the tests marked
``redis_cluster`` the local Redis Cluster too (scripts/redis_cluster.sh,
AGENTCTX_REDIS_CLUSTER_URL): those run once on each, but for the heavy ones
marked ``redis_single`` as well (the CI's time).

Redis (or the cluster) down: the tests skip, or fail with
AGENTCTX_REQUIRE_REDIS=1 (.ci/run sets it)."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from cache_service.app import CacheApp
from tests.cluster import support


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marked = metafunc.definition.get_closest_marker("redis_cluster")
    if "redis_backend" in metafunc.fixturenames and marked and not metafunc.definition.get_closest_marker("redis_single"):
        metafunc.parametrize("redis_backend", [support.SINGLE, support.CLUSTER], indirect=True)


@pytest.fixture
def redis_backend(request: pytest.FixtureRequest) -> str:
    backend: str = getattr(request, "param", support.SINGLE)
    support.require(backend)
    return backend


@pytest.fixture
def redis_prefix(redis_backend: str) -> Iterator[str]:
    prefix = support.new_prefix()
    yield prefix
    support.delete_prefix(prefix, redis_backend)
    support.delete_prefix(support.sim_prefix(prefix))


@pytest.fixture
def private_redis(redis_prefix: str) -> Iterator[support.PrivateRedis]:
    """A redis-server of this test's own, started; to kill and restart."""
    server = support.PrivateRedis()
    server.start()
    yield server
    server.kill()


@pytest.fixture
async def replicas(certs_dir: pathlib.Path, tmp_path: pathlib.Path, redis_prefix: str,
                   redis_backend: str) -> AsyncIterator[Callable[..., Any]]:
    """``await replicas(n, **settings)``: n started CacheApps sharing the prefix."""
    made: list[CacheApp] = []

    async def make(n: int = 1, **overrides: Any) -> list[CacheApp]:
        apps = []
        for _ in range(n):
            settings = support.replica_settings(certs_dir, tmp_path / f"r{len(made)}", redis_prefix, redis_backend,
                                                **overrides)
            app = await CacheApp.create(settings)
            app.start()
            made.append(app)
            apps.append(app)
        return apps

    yield make
    for app in made:
        await app.close()
