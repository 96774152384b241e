"""The single-flight claim is a short lease its holder renews (flight_claim_s):
a create that outlasts the lease keeps its claim, so the prefix still costs
one create; a leader killed with SIGKILL mid-create loses it within the
lease, one survivor takes the create over, and the callers waiting on the
other replicas get leases on that create's cache."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import subprocess
import sys

import pytest

from cache_service.domain.model import CacheState
from tests.cache.support import scope, view
from tests.cluster import support

pytestmark = pytest.mark.redis


_sim = support.sim
_until = support.until


async def test_a_create_longer_than_the_claim_lease_keeps_its_claim(replicas) -> None:
    leader, other = await replicas(2, flight_claim_s=1.5, max_waiters=256)
    gate = asyncio.Event()
    _sim(leader).create_gate = gate
    v = view(4)
    first = asyncio.ensure_future(leader.registry.acquire(scope(), v, None, None))
    await _until(lambda: _true(_sim(leader).counts["create"] == 1))
    waiting = [asyncio.ensure_future(other.registry.acquire(scope(), v, None, None)) for _ in range(32)]
    await asyncio.sleep(3.2)  # two leases and more: renewed all along, so nobody takes the create over
    gate.set()
    results = [await first, *await asyncio.gather(*waiting)]
    assert (await _sim(leader).stats())["create"] == 1
    assert all(r.lease for r in results)
    assert [r.info.state for r in results].count(CacheState.CREATED) == 1


async def _true(value: bool) -> bool:
    return value


async def test_a_leader_killed_mid_create_is_taken_over_and_its_waiters_leased(
        replicas, certs_dir: pathlib.Path, tmp_path: pathlib.Path, redis_prefix: str) -> None:
    survivors = await replicas(2, flight_claim_s=1.0, max_waiters=256)
    settings = support.replica_settings(certs_dir, tmp_path / "leader", redis_prefix, flight_claim_s=1.0)
    payload = json.dumps(json.loads(settings.model_dump_json()) | {
        "redis_url": support.REDIS_URL, "redis_encryption_key": support.ENCRYPTION_KEY,
        "lease_keys": support.LEASE_KEYS})
    leader = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.cluster.crashing_replica", payload,
                                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # The leader holds the claim and its create is under way (it never finishes).
        line = await asyncio.wait_for(leader.stdout.readline(), 30)  # type: ignore[union-attr]
        assert line.strip() == b"landed", line
        waiting = [asyncio.ensure_future(survivors[i % 2].registry.acquire(scope(), view(3), None, None))
                   for i in range(128)]
        await asyncio.sleep(0.3)
        assert not any(w.done() for w in waiting), "they wait for the leader's create"
    finally:
        leader.send_signal(signal.SIGKILL)
        await leader.wait()
    results = await asyncio.gather(*waiting)
    states = [r.info.state for r in results]
    assert all(r.lease for r in results), {(r.info.state, r.info.bypass_reason) for r in results}
    assert states.count(CacheState.CREATED) == 1 and states.count(CacheState.HIT) == 127
    assert (await _sim(survivors[0]).stats())["create"] == 2  # the dead leader's, and the one survivor's

    async def one_left() -> bool:  # the dead leader's cache is found by its display name and deleted
        for app in survivors:
            await app.janitor.drain()
        return len(await _sim(survivors[0]).live_names_shared()) == 1

    await _until(one_left)
