"""The context service reaches a set of cache replicas: ``cache_target``
names several addresses, calls are balanced round-robin over the healthy
ones, and a replica going away costs at most the call in flight on it."""

from __future__ import annotations

import pathlib

from agentctx_common.errors import AgentCtxError
from cache_service.app import CacheApp
from cache_service.server import build_server
from context_service.cache_client import CacheClient
from context_service.domain.cache_calls import CacheScope
from tests.support.servers import cache_settings, context_settings


async def test_calls_are_balanced_over_the_replicas_and_survive_one_going_away(certs_dir: pathlib.Path,
                                                                             tmp_path: pathlib.Path) -> None:
    servers, served = [], [0, 0]
    for i in range(2):
        app = await CacheApp.create(cache_settings(certs_dir, tmp_path / f"c{i}"))
        status = app.registry.status

        async def counted(scope, _status=status, _i=i):  # type: ignore[no-untyped-def]
            served[_i] += 1
            return await _status(scope)

        app.registry.status = counted  # type: ignore[method-assign]
        server = await build_server(app.settings, app=app)
        await server.start()
        servers.append(server)
    target = "ipv4:" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
    client = CacheClient(context_settings(certs_dir, tmp_path, cache_target=target))
    scope = CacheScope("app", "user-1", "local-sim-1")
    try:
        for _ in range(20):
            await client.scope_status(scope, remaining=5.0)
        assert served[0] > 0 and served[1] > 0, served
        await servers[0].stop(grace=0.5)
        failed = 0
        for _ in range(20):
            try:
                await client.scope_status(scope, remaining=5.0)
            except AgentCtxError:
                failed += 1  # at most the call caught by the replica's going away
        assert failed <= 1
    finally:
        await client.close()
        for server in servers:
            await server.stop(grace=0.5)
