"""Learned floors across Redis replicas: each keeps a floor it read for
``FLOOR_READ_S``, so an acquire does not pay a round trip for it, and one
another replica learned arrives after that."""

from __future__ import annotations

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.client import redis_client
from cache_service.cluster.names import Names
from cache_service.cluster.store import FLOOR_READ_S, RedisRegistryStore
from tests.cluster import support


async def test_a_replica_reads_a_floor_another_learned_within_the_read_window(redis_prefix: str) -> None:
    client = redis_client(support.REDIS_URL)
    now = [100.0]
    try:
        def replica() -> RedisRegistryStore:
            return RedisRegistryStore(client, Names(redis_prefix), NameCipher.from_base64(support.ENCRYPTION_KEY),
                                      monotonic=lambda: now[0])

        learner, reader = replica(), replica()
        assert await reader.learned_floor("local", "m") == 0
        await learner.learn_floor("local", "m", 4096)
        assert await learner.learned_floor("local", "m") == 4096
        # The reader serves what it read a moment ago without asking Redis...
        assert await reader.learned_floor("local", "m") == 0
        # ...and reads again once that is FLOOR_READ_S old.
        now[0] += FLOOR_READ_S
        assert await reader.learned_floor("local", "m") == 4096
    finally:
        await client.aclose()
