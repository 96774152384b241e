"""Learned floors across Redis replicas: each keeps a floor it read for
``FLOOR_READ_S``, so an acquire does not pay a round trip for it, and one
another replica learned or lowered arrives after that. A cached call's
lowering asks Redis only when the floor read is above it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.client import RedisClient, redis_client
from cache_service.cluster.names import Names
from cache_service.cluster.store import FLOOR_READ_S, RedisRegistryStore
from tests.cluster import support

pytestmark = pytest.mark.redis_cluster

DAY = 86400.0


@pytest.fixture
async def client(redis_backend: str) -> AsyncIterator[RedisClient]:
    c = redis_client(support.url_of(redis_backend))
    yield c
    await c.aclose()


def _replicas(client: RedisClient, prefix: str, now: list[float]) -> Callable[[], RedisRegistryStore]:
    def replica() -> RedisRegistryStore:
        return RedisRegistryStore(client, Names(prefix), NameCipher.from_base64(support.ENCRYPTION_KEY),
                                  monotonic=lambda: now[0])
    return replica


async def test_a_replica_reads_a_floor_another_learned_within_the_read_window(client: RedisClient,
                                                                             redis_prefix: str) -> None:
    now = [100.0]
    replica = _replicas(client, redis_prefix, now)
    learner, reader = replica(), replica()
    assert await reader.learned_floor("local", "m", 0.0) == 0
    await learner.learn_floor("local", "m", 4096, 0.0, DAY)
    assert await learner.learned_floor("local", "m", 0.0) == 4096
    # The reader serves what it read a moment ago without asking Redis...
    assert await reader.learned_floor("local", "m", 0.0) == 0
    # ...and reads again once that is FLOOR_READ_S old.
    now[0] += FLOOR_READ_S
    assert await reader.learned_floor("local", "m", 0.0) == 4096
    # What it read expires at the floor's own time, read window or not.
    assert await reader.learned_floor("local", "m", DAY) == 0


async def test_a_replica_lowers_a_floor_another_learned(client: RedisClient, redis_prefix: str) -> None:
    now = [100.0]
    replica = _replicas(client, redis_prefix, now)
    learner, lowerer = replica(), replica()
    await learner.learn_floor("local", "m", 4097, 0.0, DAY)
    await lowerer.lower_floor("local", "m", 2750, 1.0)
    assert await lowerer.learned_floor("local", "m", 1.0) == 2750
    now[0] += FLOOR_READ_S
    assert await learner.learned_floor("local", "m", 1.0) == 2750
    # A floor of the old form (no expiry) counts as none, and is replaced when learned.
    await client.hset(Names(redis_prefix).floors, "local|old", "9000")
    assert await learner.learned_floor("local", "old", 1.0) == 0
    await learner.learn_floor("local", "old", 2000, 1.0, DAY)
    assert await learner.learned_floor("local", "old", 1.0) == 2000
