"""Sightings with time, on both stores (tests/cache runs the in-memory and
the Redis registry): what ``record_sighting`` returns as the policy's
evidence, and the decisions it leads to through the registry (issue 16,
point 7)."""

from __future__ import annotations

import pytest

from cache_service.domain.keys import PrefixView
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import MISS, PolicySettings
from cache_service.providers.local import LocalProvider
from tests.cache.support import prefix, scope, view

# The store and single-flight conformance: on the Redis Cluster as well (tests/cache/conftest.py).
pytestmark = pytest.mark.redis_cluster

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
    outlives the gap, once two gaps were seen (one might have been the
    last: reads_of), or the call goes uncached."""
    h = await harness_factory(policy=SETTINGS)
    states = []
    for _ in range(6):
        r = await h.acquire(prefix(0))
        states.append((r.info.state, r.info.bypass_reason))
        if r.lease:
            await h.registry.release(r.lease)
        await h.settle()  # a hit's TTL refresh
        h.clock.advance(600)
    assert states[:2] == [(CacheState.BYPASS, BypassReason.FIRST_SIGHTING)] * 2
    assert states[2][0] is CacheState.CREATED
    assert all(s[0] is CacheState.HIT for s in states[3:])
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


async def test_first_sighting_outcomes_are_observed(harness_factory) -> None:
    """Each store keeps a scope's first sightings pending until a request
    agrees with one (its outcome: the seconds until then) or the horizon
    passes (``MISS``), and the outcomes of every scope."""
    h = await harness_factory(policy=SETTINGS)
    store, sfp = h.registry.store, scope(user="firsts").fingerprint
    first = await store.record_sighting(sfp, view(2).chain, 1000.0, 300.0)
    assert (first.agreeing_age, first.firsts, first.first_pending) == (None, (), ())
    # Another head: a second first sighting, the first still pending.
    other = await store.record_sighting(sfp, PrefixView.of(prefix(1, system=SYSTEM_B)).chain, 1010.0, 300.0)
    assert (other.agreeing_age, other.first_pending) == (None, (10.0,))
    # The first conversation goes on 20 s later: its first sighting was followed.
    follow = await store.record_sighting(sfp, view(3).chain, 1020.0, 300.0)
    assert (follow.firsts, follow.first_pending) == ((20.0,), (10.0,))
    assert follow.server_firsts[-1:] == (20.0,)
    # The other one is never followed: a MISS once the horizon passed.
    late = await store.record_sighting(sfp, view(4).chain, 1400.0, 300.0, "app-a")
    assert (late.firsts, late.first_pending) == ((20.0, MISS), ())
    assert late.app_firsts == (MISS,)  # (the earlier calls named no app)
    # Another scope of the same app sees the app's outcomes; one of another app only the server's.
    mate = await store.record_sighting(scope(user="mate").fingerprint, view(2).chain, 1401.0, 300.0, "app-a")
    assert (mate.firsts, mate.app_firsts, mate.server_firsts[-2:]) == ((), (MISS,), (20.0, MISS))
    stranger = await store.record_sighting(scope(user="other").fingerprint, view(2).chain, 1402.0, 300.0, "app-b")
    assert (stranger.app_firsts, stranger.server_firsts[-2:]) == ((), (20.0, MISS))


def _anthropic(clock) -> LocalProvider:
    return LocalProvider(name="local-anthropic", clock=clock, min_cache_tokens=64)


async def test_a_marked_first_sighting_is_written(harness_factory, clock) -> None:
    """On Anthropic's prices a fresh scope's first request writes a
    5-minute mark, read by the next call (issue 16: the large-head chat)."""
    h = await harness_factory(policy=SETTINGS, provider=_anthropic(clock))
    s = scope(provider="local-anthropic")
    assert (await h.acquire(prefix(2), s)).info.state is CacheState.CREATED
    h.clock.advance(20)
    assert (await h.acquire(prefix(3), s)).info.state in (CacheState.HIT, CacheState.GROWN)


async def test_one_off_requests_stop_writing_once_one_went_unread(harness_factory, clock) -> None:
    """A scope of one-off requests (every head new), a minute apart: the
    prior writes each while the first is pending within its 5 minutes (no
    evidence yet either way), nothing once it went unread."""
    h = await harness_factory(policy=SETTINGS, provider=_anthropic(clock))
    s = scope(provider="local-anthropic")
    states = []
    for i in range(10):
        system = {"role": "", "parts": [{"text": f"One-off instruction {i}. " * 40}]}
        states.append((await h.acquire(prefix(0, system=system), s)).info.state)
        h.clock.advance(60)
    assert states[:5] == [CacheState.CREATED] * 5
    assert states[5:] == [CacheState.BYPASS] * 5


async def test_a_wave_of_starts_is_not_read_as_conversations_ending(harness_factory, clock) -> None:
    """Twenty agents start within seconds in one scope (issue 21, point 11):
    the pending first sightings are no evidence until their 5 minutes
    pass, and a start met with 16 pending is not tracked (nothing is
    dropped or counted); so each start is written, and a start after the
    wave went unfollowed is not."""
    h = await harness_factory(policy=SETTINGS, provider=_anthropic(clock))
    s = scope(provider="local-anthropic", user="wave")
    states = []
    for i in range(20):
        system = {"role": "", "parts": [{"text": f"Agent {i} of the wave. " * 40}]}
        states.append((await h.acquire(prefix(0, system=system), s)).info.state)
        h.clock.advance(1)
    assert states == [CacheState.CREATED] * 20
    evidence = await h.registry.store.record_sighting(s.fingerprint, view(0).chain, clock.wall(), 3600.0)
    assert evidence.firsts == ()
    assert len(evidence.first_pending) == 16
    h.clock.advance(300)
    late = {"role": "", "parts": [{"text": "A late agent. " * 60}]}
    assert (await h.acquire(prefix(0, system=late), s)).info.state is CacheState.BYPASS


async def test_pending_starts_outlive_a_wave_faster_than_their_followers(harness) -> None:
    """Twenty starts a second apart, each followed 20 s later: the first
    16 stay pending (the later ones are not tracked), so the followers
    resolve them. Dropping the oldest pending start for each new one lost
    every start before its follower came, and a wave never taught that
    its starts are followed."""
    store, sfp = harness.registry.store, scope(user="wave-followed").fingerprint

    def head(i: int, turns: int) -> tuple[bytes, ...]:
        return view(turns, system={"role": "", "parts": [{"text": f"Agent {i}. " * 30}]}).chain

    for i in range(20):
        await store.record_sighting(sfp, head(i, 0), 1000.0 + i, 3600.0)
    followed = [await store.record_sighting(sfp, head(i, 1), 1020.0 + i, 3600.0) for i in range(4)]
    assert followed[-1].firsts == (20.0,) * 4
    assert followed[-1].first_pending == tuple(float(23 - i) for i in range(4, 16)), "agents 4 to 15"
    assert followed[-1].app_firsts[-4:] == (20.0,) * 4


async def test_a_named_wave_creates_at_first_sight_once_its_starts_are_followed(harness_factory, clock) -> None:
    """Gemini's prices (no first-sight prior): agents with heads of their
    own start a second apart, each calling again 20 s later (bench
    economics_oracle's wave-own-heads). The first starts go uncached, and
    once the first followers came, later starts are created at first sight
    and read by their next call."""
    h = await harness_factory(policy=SETTINGS)
    s = scope(user="named-wave")
    calls = sorted([(float(i), i, 0) for i in range(30)] + [(20.0 + i, i, 1) for i in range(30)])
    starts: dict[int, CacheState] = {}
    now = 0.0
    for at, agent, turns in calls:
        h.clock.advance(at - now)
        now = at
        system = {"role": "", "parts": [{"text": f"Agent {agent} of the named wave. " * 40}]}
        r = await h.acquire(prefix(turns, system=system), s)
        if turns == 0:
            starts[agent] = r.info.state
        if r.lease:
            await h.registry.release(r.lease)
    assert all(starts[i] is CacheState.BYPASS for i in range(20)), "no evidence before the first follower"
    assert all(starts[i] is CacheState.CREATED for i in range(24, 30)), starts
