"""Caches a conversation superseded (its history was compacted, so its new
prefix no longer extends the cache it used last) go at once, unless
another conversation read them lately; a lease still on one delays its
deletion to the lease's release. On the memory store and on Redis."""

from __future__ import annotations

import pytest

from cache_service.domain.keys import Prefix, PrefixView
from cache_service.domain.model import AcquireResult, CacheState
from cache_service.domain.policy import PolicySettings
from tests.cache.support import MODEL, SYSTEM, TOOLS, prefix, scope, view

# Holders (RegistryStore.swap_holder, holders): on the Redis Cluster as well (tests/cache/conftest.py).
pytestmark = pytest.mark.redis_cluster

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)


def compacted(turns: int = 3) -> PrefixView:
    """The history after a compaction: a summary, then what was kept."""
    summary = {"role": "user", "parts": [{"text": "Summary of the conversation so far: " + "fact " * 40}]}
    return PrefixView.of(Prefix(MODEL, SYSTEM, TOOLS, None, (summary, *prefix(turns).history[-2:])))


async def _acquire(h, v: PrefixView, holder: str) -> AcquireResult:  # type: ignore[no-untyped-def]
    return await h.registry.acquire(scope(), v, None, None, holder)


async def test_a_compacted_conversation_deletes_the_cache_it_used(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    old = await _acquire(h, view(3), "h1")
    assert old.info.state is CacheState.CREATED
    assert await h.registry.release(old.lease)
    hit = await _acquire(h, view(3), "h1")
    assert hit.info.state is CacheState.HIT and hit.entry_id == old.entry_id
    assert await h.registry.release(hit.lease)

    new = await _acquire(h, compacted(), "h1")
    assert new.info.state is CacheState.CREATED
    entries = await h.registry.entries()
    assert [e.prefix_fp for e in entries] == [new.info.prefix_fingerprint], "the superseded cache is gone"
    assert await h.registry.store.tombstone(old.entry_id) == "EXPIRED"
    await h.assert_in_step()


async def test_a_grown_prefix_supersedes_nothing(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    first = await _acquire(h, view(3), "h1")
    await h.registry.release(first.lease)
    assert not await h.registry.lifecycle.follow(scope().fingerprint, "h1", view(5), "")
    assert [e.id for e in await h.registry.entries()] == [first.entry_id]


async def test_a_cache_another_conversation_read_stays(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    mine = await _acquire(h, view(3), "h1")
    theirs = await _acquire(h, view(3), "h2")
    assert theirs.info.state is CacheState.HIT and theirs.entry_id == mine.entry_id
    for r in (mine, theirs):
        await h.registry.release(r.lease)
    await _acquire(h, compacted(), "h1")
    assert mine.entry_id in {e.id for e in await h.registry.entries()}, "h2 may read it again"

    # A caller that names no holder counts as another conversation too.
    h2 = await harness_factory(policy=EAGER)
    unnamed = await _acquire(h2, view(3), "")
    await h2.registry.release(unnamed.lease)
    await h2.registry.release((await _acquire(h2, view(3), "h1")).lease)
    await _acquire(h2, compacted(), "h1")
    assert unnamed.entry_id in {e.id for e in await h2.registry.entries()}


async def test_another_conversations_old_read_does_not_keep_it(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, refresh_on_hit=False)
    theirs = await _acquire(h, view(3), "h2")
    await h.registry.release(theirs.lease)
    h.clock.advance(200.0)
    mine = await _acquire(h, view(3), "h1")
    await h.registry.release(mine.lease)
    h.clock.advance(150.0)  # h2 read it 350 s ago, past the 300 s TTL; the cache lives on (the simulator's own TTL)
    await h.registry.store.set_expiry(mine.entry_id, h.clock.wall() + 100.0)
    await _acquire(h, compacted(), "h1")
    assert mine.entry_id not in {e.id for e in await h.registry.entries()}


async def test_a_lease_still_on_a_superseded_cache_delays_its_deletion(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    held = await _acquire(h, view(3), "h1")
    await _acquire(h, compacted(), "h1")
    (entry,) = [e for e in await h.registry.entries() if e.id == held.entry_id]
    assert entry.retiring, "no new leases on it"
    assert (await _acquire(h, view(3), "h3")).entry_id != held.entry_id
    assert await h.registry.release(held.lease)
    assert held.entry_id not in {e.id for e in await h.registry.entries()}
    await h.assert_in_step()
