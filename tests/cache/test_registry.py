"""The lease registry over the real local simulator and a real journal:
single flight, scope isolation, deadlines at the create boundary, orphans,
invalidation during a create, TTL expiry, eviction, bounds, failure modes.
After each scenario the provider holds exactly what the registry knows."""

from __future__ import annotations

import asyncio

import pytest

from agentctx_common.errors import InvalidArgument, ResourceExhausted
from cache_service.domain.keys import PrefixView
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import ProviderUnavailable, RateLimited
from tests.cache.support import prefix, scope, until_waiting, view

# The store and single-flight conformance: on the Redis Cluster as well (tests/cache/conftest.py).
pytestmark = pytest.mark.redis_cluster

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)


async def test_256_concurrent_misses_for_one_key_make_exactly_one_create(harness_factory) -> None:
    h = await harness_factory(max_waiters=256)
    h.provider.latency_s = 0.01
    v = view(3)
    results = await asyncio.gather(*(h.acquire(v) for _ in range(256)))
    states = [r.info.state for r in results]
    assert h.provider.counts["create"] == 1
    # The first caller records the prefix; every later one agrees with it and
    # joins the one create: exactly one of them reports CREATED.
    assert states.count(CacheState.BYPASS) == 1
    assert states.count(CacheState.CREATED) == 1
    assert states.count(CacheState.HIT) == 254
    assert len({r.lease for r in results if r.lease}) == 255
    await h.assert_in_step()


async def test_waiters_beyond_max_waiters_bypass_with_capacity(harness_factory) -> None:
    h = await harness_factory(max_waiters=4, policy=EAGER)
    h.provider.latency_s = 0.01
    results = await asyncio.gather(*(h.acquire(view(3)) for _ in range(10)))
    reasons = [r.info.bypass_reason for r in results]
    assert reasons.count(BypassReason.CAPACITY) == 6
    assert h.provider.counts["create"] == 1
    await h.assert_in_step()


async def test_scopes_are_isolated(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    scopes = [scope(), scope(user="user-2"), scope(app="other"), scope(policy={"context_version": 2}),
              scope(model="local-sim-2")]
    results = []
    for s in scopes:
        p = prefix(3, model=s.model)
        results.append(await h.acquire(p, s))
    assert [r.info.state for r in results] == [CacheState.CREATED] * len(scopes)
    assert len({r.info.scope_fingerprint for r in results}) == len(scopes)
    assert h.provider.counts["create"] == len(scopes)
    # A lease is honoured only in its own scope.
    _entry, _ = await h.registry.resolve(results[0].lease, scopes[0].fingerprint)
    with pytest.raises(Exception) as refused:
        await h.registry.resolve(results[0].lease, scopes[1].fingerprint)
    assert getattr(refused.value, "reason", "") == "LEASE_SCOPE_MISMATCH"
    # Invalidating one scope leaves the others alone.
    removed, cancelled = await h.registry.invalidate(scopes[1])
    assert (removed, cancelled) == (1, 0)
    assert (await h.registry.status(scopes[0])).entry_count == 1
    assert (await h.registry.status(scopes[1])).entry_count == 0
    await h.assert_in_step()


async def test_ttl_is_part_of_the_key_and_capped(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, max_ttl_s=600)
    a = await h.acquire(prefix(3), ttl=120)
    b = await h.acquire(prefix(3), ttl=7200)
    assert [r.info.state for r in (a, b)] == [CacheState.CREATED] * 2
    assert a.info.expire_time == h.clock.wall() + 120
    assert b.info.expire_time == h.clock.wall() + 600  # capped at max_ttl_s
    assert (await h.acquire(prefix(3), ttl=120)).info.state is CacheState.HIT
    # A caller that sets no TTL takes any the policy may choose (the
    # default or its steps up to max_ttl_s): here the 600 s cache.
    c = await h.acquire(prefix(3))
    assert (c.info.state, c.info.expire_time) == (CacheState.HIT, h.clock.wall() + 600)
    d = await h.acquire(prefix(4), ttl=300)
    assert (d.info.state, d.info.expire_time) == (CacheState.CREATED, h.clock.wall() + 300)


async def test_deadline_is_rechecked_when_the_result_arrived_in_time_but_is_handled_late(harness_factory) -> None:
    """The provider answers before the waiter's deadline; by the time the
    registry installs the result the deadline has passed. The waiter gets a
    deadline bypass and the new cache, wanted by nobody, is deleted."""
    h = await harness_factory(policy=EAGER)
    deadline = h.clock.monotonic() + 5

    async def handled_late() -> None:
        h.clock.advance(6)

    h.registry.after_create_result = handled_late
    r = await h.acquire(view(3), deadline=deadline)
    assert (r.info.state, r.info.bypass_reason, r.lease) == (CacheState.BYPASS, BypassReason.DEADLINE_EXCEEDED, "")
    assert h.provider.counts["create"] == 1
    await h.settle()
    assert h.provider.counts["delete"] == 1 and not h.provider.live_names()
    assert h.registry.orphans_deleted == 1
    await h.assert_in_step()


async def test_late_and_timely_waiters_of_one_create(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, create_timeout_s=60)
    h.provider.create_gate = asyncio.Event()
    now = h.clock.monotonic()
    # Deadlines are also real seconds away for the waits: long enough for a loaded machine.
    early = asyncio.create_task(h.acquire(view(3), deadline=now + 20))
    late = asyncio.create_task(h.acquire(view(3), deadline=now + 50))
    await until_waiting(h.registry, scope(), 2)
    assert (await h.registry.status(scope())).waiter_count == 2
    h.clock.advance(30)  # past the first waiter's deadline, before the second's
    h.provider.create_gate.set()
    r_early, r_late = await early, await late
    assert r_early.info.bypass_reason is BypassReason.DEADLINE_EXCEEDED
    # The first waiter that is still in time reports the create.
    assert r_late.info.state is CacheState.CREATED and r_late.lease
    await h.assert_in_step()
    assert len(h.provider.live_names()) == 1


async def test_orphan_create_after_every_waiter_timed_out_is_deleted(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    h.provider.create_gate = asyncio.Event()
    # A deadline on the monotonic clock that is real time away: the wait times out.
    r = await h.acquire(view(3), deadline=h.clock.monotonic() + 0.05)
    assert r.info.bypass_reason is BypassReason.DEADLINE_EXCEEDED
    assert (await h.registry.status(scope())).inflight_count == 1
    h.provider.create_gate.set()
    await h.settle()
    assert h.provider.counts["create"] == 1 and h.provider.counts["delete"] == 1
    assert (await h.registry.entry_count()) == 0
    await h.assert_in_step()


async def test_invalidate_during_an_in_flight_create(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    h.provider.create_gate = asyncio.Event()
    waiters = [asyncio.create_task(h.acquire(view(3))) for _ in range(3)]
    await until_waiting(h.registry, scope(), 3)
    status = await h.registry.status(scope())
    assert (status.inflight_count, status.waiter_count) == (1, 3)
    assert (await h.registry.invalidate(scope())) == (0, 1)
    results = await asyncio.gather(*waiters)
    assert {r.info.bypass_reason for r in results} == {BypassReason.INVALIDATED}
    # The create finishes after the invalidation: its cache is deleted, not installed.
    h.provider.create_gate.set()
    await h.settle()
    assert h.provider.counts["delete"] == 1
    assert (await h.registry.status(scope())).entry_count == 0
    await h.assert_in_step()
    # Invalidation also forgot the scope's sightings: the next request is new.
    r = await h.acquire(view(3))
    assert r.info.state is CacheState.CREATED  # EAGER creates at first sight


async def test_ttl_expiry_deletes_through_the_cleanup_path(harness) -> None:
    h = harness
    await h.acquire(prefix(2))
    r = await h.acquire(prefix(3))
    assert r.info.state is CacheState.CREATED
    h.clock.advance(299)
    await h.registry.sweep()
    await h.settle()
    assert h.provider.counts["delete"] == 0
    h.clock.advance(2)
    await h.registry.sweep()
    await h.settle()
    assert h.provider.counts["delete"] == 1
    assert (await h.registry.entry_count()) == 0 and h.journal.pending() == []


async def test_a_cache_close_to_expiry_is_not_leased(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, expiry_margin_s=10, refresh_on_hit=False)
    await h.acquire(view(3))
    h.clock.advance(295)
    r = await h.acquire(view(3))
    # Not a HIT on a cache with 5 s left: a new cache (the old one expires by itself).
    assert r.info.state is CacheState.CREATED


async def test_hit_extends_ttl_when_half_is_left(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    first = await h.acquire(view(3))
    h.clock.advance(200)
    r = await h.acquire(view(3))
    assert r.info.state is CacheState.HIT
    await h.settle()
    assert h.provider.counts["update"] == 1
    entry = (await h.registry.entries())[0]
    assert entry.handle.expire_time == h.clock.wall() + 300
    assert first.info.expire_time is not None and entry.handle.expire_time > first.info.expire_time


async def test_eviction_deletes_the_least_recently_used_idle_cache(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, max_entries=2)
    a = await h.acquire(prefix(3), scope(user="a"))
    b = await h.acquire(prefix(3), scope(user="b"))
    await h.registry.release(a.lease)
    await h.registry.release(b.lease)
    h.clock.advance(1)
    assert (await h.acquire(prefix(3), scope(user="a"))).info.state is CacheState.HIT
    await h.registry.release((await h.acquire(prefix(3), scope(user="a"))).lease)
    c = await h.acquire(prefix(3), scope(user="c"))
    assert c.info.state is CacheState.CREATED
    await h.settle()
    assert h.provider.counts["delete"] == 1
    assert (await h.registry.status(scope(user="b"))).entry_count == 0  # b was least recently used
    assert (await h.registry.status(scope(user="a"))).entry_count == 1
    await h.assert_in_step()


async def test_no_eviction_of_leased_caches_means_capacity_bypass(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, max_entries=1)
    held = await h.acquire(prefix(3), scope(user="a"))
    r = await h.acquire(prefix(3), scope(user="b"))
    assert r.info.bypass_reason is BypassReason.CAPACITY
    assert h.provider.counts["create"] == 1
    await h.registry.resolve(held.lease)  # still valid


async def test_a_create_that_evicts_its_own_scopes_last_cache_gives_its_slot_back(harness_factory) -> None:
    """Regression: when the eviction that made room for a create removed the
    last cache of the create's own scope, the create was counted in a slot
    that was never given back, so the registry lost one of its
    ``max_entries`` for good."""
    h = await harness_factory(policy=EAGER, max_entries=2)
    held = await h.acquire(prefix(3), scope(user="z"))
    first = await h.acquire(prefix(3), scope(user="a"))
    await h.registry.release(first.lease)
    other = await h.acquire(prefix(3, system={"role": "", "parts": [{"text": "Another assistant. " * 20}]}),
                            scope(user="a"))
    assert other.info.state is CacheState.CREATED  # after evicting a's first cache
    await h.registry.invalidate(scope(user="a"))
    assert await h.registry.entry_count() == 1  # z's, still leased
    r = await h.acquire(prefix(3), scope(user="b"))
    assert r.info.state is CacheState.CREATED, r.info
    await h.registry.resolve(held.lease)
    await h.assert_in_step()


async def test_prefix_over_max_bytes_bypasses_without_a_provider_call(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, max_prefix_bytes=1000)
    r = await h.acquire(view(3))
    assert r.info.bypass_reason is BypassReason.CAPACITY
    assert h.provider.counts["create"] == 0


async def test_scope_over_max_bytes_is_invalid(harness_factory) -> None:
    h = await harness_factory(max_scope_bytes=256)
    with pytest.raises(InvalidArgument) as err:
        await h.acquire(view(3), scope(policy={"labels": "x" * 300}))
    assert err.value.reason == "SCOPE_TOO_LARGE"
    assert err.value.field_violations[0].field == "scope.policy"


async def test_create_failure_is_a_bypass_in_bypass_mode(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    h.provider.fail_next("create", RateLimited(retry_after=7))
    r = await h.acquire(view(3))
    assert (r.info.state, r.info.bypass_reason) == (CacheState.BYPASS, BypassReason.RATE_LIMITED)
    h.provider.fail_next("create", ProviderUnavailable())
    r = await h.acquire(view(3))
    assert r.info.bypass_reason is BypassReason.UNAVAILABLE
    await h.assert_in_step()


async def test_create_failure_is_an_error_in_error_mode(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, failure_mode="error")
    h.provider.fail_next("create", RateLimited(retry_after=7))
    with pytest.raises(ResourceExhausted) as err:
        await h.acquire(view(3))
    assert (err.value.reason, err.value.retry_after) == ("RATE_LIMITED", 7)
    # Policy bypasses stay bypasses in error mode.
    small = PrefixView.of(prefix(0, system={"role": "", "parts": [{"text": "hi"}]}, tools=()))
    assert (await h.acquire(small)).info.bypass_reason is BypassReason.BELOW_MIN_TOKENS


async def test_nested_policy_maps_are_copied(harness_factory) -> None:
    """ADK Go #1951 review: nested maps in shared options were not copied,
    so a caller's later write changed everyone's. A scope's policy is copied
    at any depth: editing the caller's map changes nothing we hold."""
    h = await harness_factory(policy=EAGER)
    labels = {"context_version": 2, "nested": {"team": "a", "tags": ["x"]}}
    s = scope(policy=labels)
    fingerprint = s.fingerprint
    r = await h.acquire(view(3), s)
    labels["nested"]["team"] = "b"  # type: ignore[index]
    labels["nested"]["tags"].append("y")  # type: ignore[index]
    assert s.fingerprint == fingerprint
    assert await h.registry.resolve(r.lease, fingerprint)
    assert (await h.acquire(view(3), scope(policy=labels))).info.state is CacheState.CREATED


async def test_invalidate_removes_every_entry_of_the_scope_across_prefixes_and_ttls(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    for n, ttl in ((2, None), (3, None), (3, 900.0)):
        await h.acquire(prefix(n, words=n * 40), ttl=ttl)
    await h.acquire(prefix(3), scope(user="someone-else"))
    status = await h.registry.status(scope())
    assert status.entry_count == 3 and status.prefix_bytes > 0
    assert (await h.registry.invalidate(scope())) == (3, 0)
    await h.settle()
    assert h.provider.counts["delete"] == 3
    assert (await h.registry.status(scope(user="someone-else"))).entry_count == 1
    await h.assert_in_step()


async def test_a_cancelled_caller_leaves_no_cache_behind(harness_factory) -> None:
    """The caller's RPC is cancelled while the create is in flight: the cache
    that arrives later has nobody waiting and is deleted, not leaked."""
    h = await harness_factory(policy=EAGER)
    h.provider.create_gate = asyncio.Event()
    caller = asyncio.create_task(h.acquire(view(3)))
    await until_waiting(h.registry, scope(), 1)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert (await h.registry.status(scope())).waiter_count == 0
    h.provider.create_gate.set()
    await h.settle()
    assert (h.provider.counts["create"], h.provider.counts["delete"]) == (1, 1)
    await h.assert_in_step()
