"""Sightings with time, on both stores (tests/cache runs the in-memory and
the Redis registry): what ``record_sighting`` returns as the policy's
evidence, and the decisions it leads to through the registry (issue 16,
point 7)."""

from __future__ import annotations

from cache_service.domain.keys import PrefixView
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import PolicySettings
from tests.cache.support import prefix, scope, view

SETTINGS = PolicySettings(min_prefix_tokens=64)
SYSTEM_B = {"role": "", "parts": [{"text": "Another agent's instruction. " * 20}]}


async def test_evidence_carries_time(harness) -> None:
    store, sfp = harness.registry.store, scope().fingerprint
    first = await store.record_sighting(sfp, view(2).chain, 1000.0, 3600.0)
    assert (first.agreeing_age, first.gaps, first.previous_agrees, first.continued) == (None, (), False, 1.0)
    # The next call of the conversation, 20 s later: it extends the record.
    second = await store.record_sighting(sfp, view(3).chain, 1020.0, 3600.0)
    assert (second.agreeing_age, second.gaps, second.head_gaps, second.previous_agrees) == (20.0, (20.0,), (20.0,), True)
    # A new session's first call (the head alone) 600 s later: only the head agrees.
    head = await store.record_sighting(sfp, view(0).chain, 1620.0, 3600.0)
    assert (head.agreeing_age, head.gaps, head.head_gaps, head.previous_agrees) == (600.0, (20.0,), (20.0, 600.0), False)
    assert head.continued == 2 / 3
    # Older than the horizon: no agreement at all.
    late = await store.record_sighting(sfp, view(4).chain, 1620.0 + 3600.0, 3600.0)
    # (ADK's agreement with the previous request carries no time.)
    assert (late.agreeing_age, late.previous_agrees) == (None, True)
    # Other heads and scopes are apart.
    other = await store.record_sighting(sfp, PrefixView.of(prefix(3, system=SYSTEM_B)).chain, 1700.0, 3600.0)
    assert other.agreeing_age is None


async def test_one_call_sessions_far_apart_are_cached_across_the_gap_or_not_at_all(harness_factory) -> None:
    """50 one-call sessions 600 s apart used to create 49 caches, each read
    only by its creating call. Now the head is cached once, for a TTL that
    outlives the gap (900 s on Gemini's prices), or the call goes uncached."""
    h = await harness_factory(policy=SETTINGS)
    states = []
    for _ in range(6):
        r = await h.acquire(prefix(0))
        states.append((r.info.state, r.info.bypass_reason))
        if r.lease:
            await h.registry.release(r.lease)
        await h.settle()  # a hit's TTL refresh
        h.clock.advance(600)
    assert states[0] == (CacheState.BYPASS, BypassReason.FIRST_SIGHTING)
    assert states[1][0] is CacheState.CREATED
    assert all(s[0] is CacheState.HIT for s in states[2:])
    assert h.provider.counts["create"] == 1
    # With a caller's TTL of 300 s nothing can be read across the gap: never created.
    h2 = await harness_factory(policy=SETTINGS)
    for _ in range(4):
        r = await h2.acquire(prefix(0), ttl=300)
        assert r.info.bypass_reason is BypassReason.FIRST_SIGHTING
        h2.clock.advance(600)
    assert h2.provider.counts["create"] == 0


async def test_a_compaction_does_not_depend_on_the_servers_other_sightings(harness_factory) -> None:
    """The head's record used to count for any later prefix only while it
    was among the newest ``max_sightings`` of the whole server. Now every
    call refreshes its head's record: a compaction's new prefix (the head
    and a summary) under a busy head is cached at once, however many
    sightings other scopes made before."""
    async def compaction(h, user: str) -> CacheState:
        for n in range(2, 8):
            await h.acquire(prefix(n), scope(user=user))
            h.clock.advance(20)
        summary = prefix(1, words=200)  # the history replaced by one summary
        return (await h.acquire(summary, scope(user=user))).info.state

    fresh = await harness_factory(policy=SETTINGS, max_sightings=64)
    aged = await harness_factory(policy=SETTINGS, max_sightings=64)
    for i in range(200):  # other scopes' traffic before this scope's
        await aged.acquire(prefix(2), scope(user=f"other-{i}"))
    # (Two users: on Redis both harnesses share one registry.)
    assert await compaction(fresh, "fresh") is CacheState.CREATED
    assert await compaction(aged, "aged") is CacheState.CREATED
