"""Learned floors (the smallest prefix a provider caches, as its refusals
and uncached breakpoints taught the registry) and reported creates: the
registry store's contract, on the memory store, Redis and the Redis
Cluster alike; across Redis replicas in tests/cluster/test_learned_floor.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cache_service.domain.entry import Entry, new_entry_id
from cache_service.domain.model import CacheHandle, CacheState, ResourceName
from cache_service.domain.policy import PolicySettings
from tests.cache.support import MODEL, scope, view

pytestmark = pytest.mark.redis_cluster

DAY = 86400.0


async def test_a_floor_is_learned_at_once_and_only_raised_by_learning(harness_factory: Callable[..., Any]) -> None:
    store = (await harness_factory()).registry.store
    assert await store.learned_floor("local", "m", 0.0) == 0
    await store.learn_floor("local", "m", 2048, 0.0, DAY)
    assert await store.learned_floor("local", "m", 1.0) == 2048
    await store.learn_floor("local", "m", 1000, 1.0, DAY)
    assert await store.learned_floor("local", "m", 2.0) == 2048
    await store.learn_floor("local", "m", 3000, 2.0, DAY)
    assert await store.learned_floor("local", "m", 3.0) == 3000
    assert await store.learned_floor("local", "other", 3.0) == 0


async def test_a_prefix_cached_below_a_learned_floor_lowers_it(harness_factory: Callable[..., Any]) -> None:
    store = (await harness_factory()).registry.store
    await store.learn_floor("local", "m", 4097, 0.0, DAY)
    await store.lower_floor("local", "m", 5000, 1.0)  # cached above the floor: no news
    assert await store.learned_floor("local", "m", 2.0) == 4097
    await store.lower_floor("local", "m", 2750, 3.0)
    assert await store.learned_floor("local", "m", 4.0) == 2750
    await store.lower_floor("local", "m", 1200, 5.0)
    assert await store.learned_floor("local", "m", 6.0) == 1200
    # Lowering keeps the expiry it was taught with, and teaches nothing where nothing was learned.
    assert await store.learned_floor("local", "m", DAY - 1.0) == 1200
    assert await store.learned_floor("local", "m", DAY) == 0
    await store.lower_floor("local", "fresh", 1000, 7.0)
    assert await store.learned_floor("local", "fresh", 8.0) == 0
    # A floor learned again after it came down is kept anew.
    await store.learn_floor("local", "m", 2048, DAY + 1.0, DAY)
    assert await store.learned_floor("local", "m", DAY + 2.0) == 2048


async def test_a_learned_floor_expires_unless_taught_again(harness_factory: Callable[..., Any]) -> None:
    store = (await harness_factory()).registry.store
    await store.learn_floor("local", "m", 4097, 0.0, DAY)
    assert await store.learned_floor("local", "m", DAY - 1.0) == 4097
    assert await store.learned_floor("local", "m", DAY) == 0
    # Expired, a lower one is learned at once; taught again, it is kept a day from then.
    await store.learn_floor("local", "m", 3000, DAY + 1.0, DAY)
    await store.learn_floor("local", "m", 3000, 1.5 * DAY, DAY)
    assert await store.learned_floor("local", "m", 2.4 * DAY) == 3000
    assert await store.learned_floor("local", "m", 2.5 * DAY) == 0
    # An expired floor is not lowered back to life.
    await store.lower_floor("local", "m", 100, 2.6 * DAY)
    assert await store.learned_floor("local", "m", 2.6 * DAY) == 0


async def test_a_create_is_reported_once_per_entry(harness_factory: Callable[..., Any]) -> None:
    store = (await harness_factory()).registry.store
    s, v = scope(), view(2)
    sfp = s.fingerprint
    entry_id = new_entry_id(sfp)
    await store.put(Entry(id=entry_id, generation=await store.next_generation(), scope=s, scope_fp=sfp,
                          ttl_s=300.0, prefix_fp="p", history_len=v.history_len, digest=v.digest, tokens=v.tokens,
                          size_bytes=v.size_bytes, handle=CacheHandle(ResourceName("cachedContents/x"), 1e12),
                          last_used=0.0))
    assert [await store.report_create(entry_id) for _ in range(3)] == [True, False, False]
    after = await store.get(entry_id)
    assert after is not None and after.tokens == v.tokens  # the entry reads as before
    assert await store.remove(entry_id, "EXPIRED") is not None
    assert await store.report_create(entry_id)  # gone: nothing says it was reported


async def test_a_create_that_succeeds_lowers_a_floor_learned_above_it(harness_factory: Callable[..., Any]) -> None:
    # The local provider keeps named caches (as Gemini): its create of the prefix succeeds.
    h = await harness_factory(policy=PolicySettings(min_prefix_tokens=64, sightings_before_create=0))
    store, v = h.registry.store, view(3)

    async def odd_refusal_meanwhile() -> None:  # another replica's, say, while this create ran
        await store.learn_floor("local", MODEL, 10 * v.tokens, h.clock.wall(), DAY)

    h.registry.after_create_result = odd_refusal_meanwhile
    created = await h.acquire(v)
    assert created.info.state is CacheState.CREATED
    await h.settle()  # the floor is lowered after the waiters have their leases
    assert await store.learned_floor("local", MODEL, h.clock.wall()) == v.tokens
    # So another scope's prefix as large is cached, not sent plain.
    h.registry.after_create_result = None
    other = await h.acquire(v, scope(user="user-2"))
    assert other.info.state is CacheState.CREATED
