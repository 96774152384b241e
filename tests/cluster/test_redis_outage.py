"""Redis gone from under the tier (a redis-server of the test's own, killed
with SIGKILL and started again, empty): acquires go uncached with BYPASS
REGISTRY_UNAVAILABLE at once (UNAVAILABLE with RetryInfo under
failure_mode "error", relayed as such by the context service), never
INTERNAL; a create whose install meets the outage answers its waiters at
once and deletes its cache; journal records spill to the local file and are
reconciled when Redis is back; caching resumes on its own (turns through
both services: test_turns_without_redis)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agentctx_common.errors import Unavailable
from cache_service.domain.model import BypassReason, CacheSpec, CacheState
from cache_service.domain.ports import RegistryUnavailable
from tests.cache.support import MODEL, scope, view
from tests.cluster import support

pytestmark = pytest.mark.redis


_sim = support.sim
_until = support.until


async def test_acquires_bypass_while_redis_is_down_and_cache_again_after(
        replicas, private_redis: support.PrivateRedis, caplog: pytest.LogCaptureFixture) -> None:
    (app,) = await replicas(1, **support.outage_settings(private_redis))
    assert (await app.registry.acquire(scope(), view(3), None, None)).info.state is CacheState.CREATED
    private_redis.kill()
    caplog.set_level(logging.WARNING, logger="agentctx.cache")
    # A hit, a miss that would create, a first sighting: all uncached, none an error.
    for s, v in ((scope(), view(3)), (scope(user="u2"), view(4)), (scope(user="u3"), view(2))):
        for _ in range(5):
            r = await app.registry.acquire(s, v, None, None)
            assert (r.lease, r.info.state, r.info.bypass_reason) == (
                "", CacheState.BYPASS, BypassReason.REGISTRY_UNAVAILABLE)
    await asyncio.sleep(0.5)  # sweeps, heartbeats and the flight listener meet the outage meanwhile
    outages = [r for r in caplog.records if "registry unreachable" in r.getMessage()]
    assert len(outages) == 1, "one line per outage, not one per step or task"

    private_redis.start()  # empty, as after a restart without persistence

    async def cached() -> bool:
        r = await app.registry.acquire(scope(user="u4"), view(3), None, None)
        return r.info.state is CacheState.CREATED

    await _until(cached)
    assert any("registry reachable again" in r.getMessage() for r in caplog.records)
    assert (await app.registry.acquire(scope(user="u4"), view(3), None, None)).info.state is CacheState.HIT


async def test_error_mode_raises_unavailable_with_retry_info(
        replicas, private_redis: support.PrivateRedis) -> None:
    (app,) = await replicas(1, **support.outage_settings(private_redis, failure_mode="error"))
    private_redis.kill()
    for cause in ("connection", "tripped"):
        with pytest.raises(Unavailable) as info:
            await app.registry.acquire(scope(), view(3), None, None)
        assert isinstance(info.value, RegistryUnavailable)
        assert info.value.reason.value == "REGISTRY_UNAVAILABLE" and info.value.retry_after == 0.2
        assert info.value.metadata["cause"] in (cause, "timeout")


async def test_a_create_whose_install_meets_the_outage_answers_its_waiters_at_once(
        replicas, private_redis: support.PrivateRedis) -> None:
    (app,) = await replicas(1, **support.outage_settings(private_redis, create_timeout_s=30.0))
    sim = _sim(app)
    gate = asyncio.Event()
    sim.create_gate = gate
    s, v = scope(), view(3)
    callers = [asyncio.ensure_future(app.registry.acquire(s, v, None, None)) for _ in range(8)]
    await _until(lambda: _true(sim.counts["create"] == 1))
    private_redis.kill()
    gate.set()  # the provider answers; the registry cannot take the cache
    results = await asyncio.wait_for(asyncio.gather(*callers), 5.0)  # not their 31 s deadline
    assert {(r.info.state, r.info.bypass_reason) for r in results} == {
        (CacheState.BYPASS, BypassReason.REGISTRY_UNAVAILABLE)}

    async def deleted() -> bool:
        await app.janitor.drain()
        return not await sim.live_names_shared()

    await _until(deleted)  # no registry entry will ever name it: deleted, not left to its TTL
    private_redis.start()
    assert app.tier is not None

    async def settled() -> bool:
        return not app.journal.pending()

    await _until(settled)


async def _true(value: bool) -> bool:
    return value


async def test_caches_journaled_while_redis_is_down_are_reconciled_when_it_returns(
        replicas, private_redis: support.PrivateRedis) -> None:
    (app,) = await replicas(1, **support.outage_settings(private_redis))
    sim = _sim(app)
    private_redis.kill()
    # A create the registry never installed (Redis went while it ran): journaled in the spill file.
    p = view(3).prefix
    spec = CacheSpec(MODEL, p.system_instruction, p.tools, p.tool_config, p.history, 600.0, "agentctx-00000000000000aa")
    await app.journal.intent("00000000000000aa", "local", spec.display_name, 1e12)
    handle = await sim.create_cache(spec)
    await app.journal.created("00000000000000aa", handle.name, handle.expire_time)
    spill = app.settings.data_dir / "registry-spill.jsonl"
    assert spill.exists() and b"00000000000000aa" in spill.read_bytes()
    assert [r.entry_id for r in app.journal.pending()] == ["00000000000000aa"]

    private_redis.start()

    async def reconciled() -> bool:
        await app.janitor.drain()
        return not await sim.live_names_shared() and not app.journal.pending()

    await _until(reconciled)
    assert app.tier is not None and app.tier.report.spilled == 1
    assert b"00000000000000aa" not in spill.read_bytes()
