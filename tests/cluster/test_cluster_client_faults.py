"""redis-py's cluster client with a stale slot map (redis/redis-py#3835:
a node it looks up is gone in a failover) fails with a plain
AttributeError from inside its own module. The registry's guard reads that
as the cluster moving, a retryable RegistryUnavailable like any outage
(acquires bypass, never INTERNAL), and has the client re-read its slot
map; the same error raised by a step's own
code is a bug and passes through."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from cache_service.cluster.client import redis_client
from cache_service.cluster.guard import RegistryGuard
from cache_service.domain.ports import RegistryUnavailable
from tests.cluster import support


async def test_a_cluster_client_fault_in_a_failover_is_an_outage() -> None:
    support.require(support.CLUSTER)
    client = redis_client(support.CLUSTER_URL)
    guard = RegistryGuard(client, timeout_s=5.0, retry_s=0.5)
    key = f"{support.new_prefix()}stale-slot"
    try:
        assert await guard.run(lambda: client.get(key)) is None
        # The slot map as redis-py leaves it mid-failover: the slot's node is gone.
        assert isinstance(client, RedisCluster)
        client.nodes_manager.slots_cache[key_slot(key.encode())] = [None]  # type: ignore[list-item]
        with pytest.raises(RegistryUnavailable) as raised:
            await guard.run(lambda: client.get(key))
        assert raised.value.cause == "connection"
        assert guard.down, "tripped: the next steps fail fast until a probe gets through"
        # The trip had the client re-read its slot map, so the probe after retry_s gets through.
        await asyncio.sleep(0.6)
        assert await guard.run(lambda: client.get(key)) is None
        assert not guard.down
    finally:
        await client.aclose()


async def test_the_same_error_from_a_step_itself_is_a_bug() -> None:
    guard = RegistryGuard(None, timeout_s=5.0, retry_s=0.5)

    async def broken() -> None:
        raise AttributeError("a bug in the step")

    with pytest.raises(AttributeError):
        await guard.run(broken)
    assert not guard.down
