"""Learned floors (the smallest prefix a provider accepted to cache, as its
refusals taught the registry) on both stores, and on Redis across replicas:
each replica keeps a floor it read for ``FLOOR_READ_S``, so an acquire does
not pay a round trip for it, and one learned elsewhere arrives after that."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.names import Names
from cache_service.cluster.store import FLOOR_READ_S, RedisRegistryStore


async def test_a_floor_is_learned_at_once_and_never_lowered(harness_factory: Callable[..., Any]) -> None:
    store = (await harness_factory()).registry.store
    assert await store.learned_floor("local", "m") == 0
    await store.learn_floor("local", "m", 2048)
    assert await store.learned_floor("local", "m") == 2048
    await store.learn_floor("local", "m", 1000)
    assert await store.learned_floor("local", "m") == 2048
    assert await store.learned_floor("local", "other") == 0


async def test_a_replica_reads_a_floor_another_learned_within_the_read_window(registry_state: str | None) -> None:
    if registry_state is None:
        pytest.skip("one process: nothing to share")
    from cache_service.registry_backend import redis_client
    from tests.cluster import support

    client = redis_client(support.REDIS_URL)
    now = [100.0]
    try:
        def replica() -> RedisRegistryStore:
            return RedisRegistryStore(client, Names(registry_state), NameCipher.from_base64(support.ENCRYPTION_KEY),
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
