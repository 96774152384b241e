"""Failover under load: the registry's Redis fails over to its replica
while two replicas of the tier serve conversations, each lease resolved on
the other replica at once. A Sentinel-managed Redis (``SENTINEL FAILOVER``
on a master, replica and sentinel of the test's own; then the new master
killed, found dead by the sentinel and replaced) and the local Redis
Cluster (a manual ``CLUSTER FAILOVER`` of the master holding the
conversations' first shard, then that master killed with SIGKILL and
brought back as a replica). The client follows the new master: no acquire
fails beyond BYPASS, no lease resolves to another entry's resource, and
caching goes on after it."""

from __future__ import annotations

import asyncio
import collections
import pathlib
from typing import Any

import pytest

from agentctx_common.errors import AgentCtxError
from cache_service.cluster.names import Names
from cache_service.domain.model import CacheState
from cache_service.domain.ports import LeaseRejected, RegistryUnavailable
from tests.cache.support import scope, view
from tests.cluster import support

pytestmark = pytest.mark.redis

CONVERSATIONS = 6


class Load:
    """Conversations over the replicas until stopped, tallied."""

    def __init__(self, apps: list[Any]) -> None:
        self.apps = apps
        self.stop = asyncio.Event()
        self.tally: collections.Counter[str] = collections.Counter()
        self.failed: list[str] = []  # acquires that raised (never allowed)
        self.names: dict[str, object] = {}  # entry id -> the resource its leases resolved to
        self.wrong = 0  # leases that resolved to another resource than their entry's

    async def run(self) -> None:
        await asyncio.gather(*(self._conversation(k) for k in range(CONVERSATIONS)))

    async def _conversation(self, k: int) -> None:
        app, other = self.apps[k % len(self.apps)], self.apps[(k + 1) % len(self.apps)]
        turn = 0
        while not self.stop.is_set():
            turn += 1
            try:
                r = await app.registry.acquire(scope(user=f"conv-{k}"), view(2 + turn % 3), None, None)
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none may happen
                self.failed.append(type(exc).__name__)
                continue
            state = r.info.state
            self.tally[state.value if state is not CacheState.BYPASS else r.info.bypass_reason.value] += 1
            if r.lease:
                await self._check(other, r.lease, r.entry_id)
            await asyncio.sleep(0.01)

    async def _check(self, app: Any, lease: str, entry_id: str) -> None:
        try:
            entry, claims = await app.registry.resolve(lease)
        except (LeaseRejected, RegistryUnavailable, AgentCtxError):
            return  # refused or unanswerable: never another resource
        if claims.entry_id != entry_id or entry.id != entry_id:
            self.wrong += 1
            return
        if self.names.setdefault(entry.id, entry.handle.name) != entry.handle.name:
            self.wrong += 1

    def served(self) -> int:
        return self.tally[CacheState.CREATED.value] + self.tally[CacheState.HIT.value]


async def _under_load(apps: list[Any], failover: Any) -> Load:
    load = Load(apps)
    task = asyncio.create_task(load.run())
    await support.until(lambda: _served(load, 10))
    before = load.served()
    await asyncio.to_thread(failover)
    await support.until(lambda: _served(load, before + 20))  # caching goes on past the failover
    load.stop.set()
    await task
    return load


async def _served(load: Load, n: int) -> bool:
    return load.served() >= n


def _assert_clean(load: Load) -> None:
    assert load.failed == []
    assert load.wrong == 0
    assert set(load.tally) <= {"CREATED", "HIT", "REGISTRY_UNAVAILABLE"}, load.tally


async def test_a_sentinel_failover_under_load(replicas, tmp_path: pathlib.Path) -> None:
    sentinel = support.SentinelRedis(tmp_path / "sentinel")
    sentinel.start()
    try:
        apps = await replicas(2, redis_url=sentinel.url, registry_timeout_s=1.0, registry_retry_s=0.2)
        first = sentinel.master()
        load = await _under_load(apps, sentinel.failover)
        _assert_clean(load)
        assert sentinel.master() != first
        # The new master killed: acquires bypass until the sentinel promotes the old one, then cache again.
        load = await _under_load(apps, sentinel.kill_master)
        _assert_clean(load)
        assert sentinel.master() == first
        # The registry's writes land on the new master.
        new = support.redis.Redis(port=sentinel.master())
        assert new.info("replication")["role"] == "master"
        assert new.dbsize() > 0
        new.close()
    finally:
        sentinel.stop()


@pytest.mark.parametrize("redis_backend", [support.CLUSTER], indirect=True)
async def test_a_cluster_master_failover_under_load(replicas, redis_prefix: str) -> None:
    apps = await replicas(2, registry_timeout_s=1.0, registry_retry_s=0.2)
    shard = Names(redis_prefix).of_scope(scope(user="conv-0").fingerprint)
    moved: list[tuple[str, str]] = []
    load = await _under_load(apps, lambda: moved.append(support.cluster_failover(f"{shard.base}x")))
    _assert_clean(load)
    old, new = moved[0]
    assert old != new


@pytest.mark.parametrize("redis_backend", [support.CLUSTER], indirect=True)
async def test_a_cluster_master_killed_under_load(replicas, redis_prefix: str) -> None:
    apps = await replicas(2, registry_timeout_s=1.0, registry_retry_s=0.2)
    shard = Names(redis_prefix).of_scope(scope(user="conv-0").fingerprint)
    moved: list[tuple[str, str]] = []
    try:
        load = await _under_load(apps, lambda: moved.append(support.cluster_kill_master(f"{shard.base}x")))
    finally:
        await asyncio.to_thread(support.cluster_restore)  # the killed node rejoins as a replica
    _assert_clean(load)
    old, new = moved[0]
    assert old != new
