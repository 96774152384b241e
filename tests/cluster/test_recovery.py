"""Crash recovery of the tier: a replica killed with SIGKILL mid-create has
its cache deleted by a live replica once its heartbeat is gone; a replica
that dies after installing has its caches adopted and served; Redis
restarted empty (its key prefix deleted) is reconciled from the provider's
list. Every case ends with 0 caches at the provider beyond what the
registry serves."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import subprocess
import sys

import pytest

from tests.cache.support import scope, view
from tests.cluster import support

pytestmark = pytest.mark.redis


_sim = support.sim
_until = support.until


async def test_a_replica_killed_mid_create_leaves_no_cache(replicas, certs_dir: pathlib.Path,
                                                           tmp_path: pathlib.Path, redis_prefix: str) -> None:
    # A short create deadline: the dead replica's lock lease (deadline + 2 s) ends soon.
    (live,) = await replicas(1, create_timeout_s=1.0)
    settings = support.replica_settings(certs_dir, tmp_path / "doomed", redis_prefix, create_timeout_s=1.0)
    payload = json.dumps(json.loads(settings.model_dump_json()) | {
        "redis_url": support.REDIS_URL, "redis_encryption_key": support.ENCRYPTION_KEY,
        "lease_keys": support.LEASE_KEYS})
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.cluster.crashing_replica", payload,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)  # type: ignore[union-attr]
        assert line.strip() == b"landed", line
        assert len(await _sim(live).live_names_shared()) == 1
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

    async def gone() -> bool:
        await live.janitor.drain()
        return not await _sim(live).live_names_shared()

    await _until(gone)
    assert live.tier is not None and live.tier.report.deleted == 1
    # The next miss creates it afresh once the dead replica's lock ended with its lease.

    async def created() -> bool:
        return bool((await live.registry.acquire(scope(), view(3), None, None)).lease)

    await _until(created)


async def test_a_dead_replicas_installed_caches_are_adopted_then_expire_cleanly(replicas) -> None:
    doomed, live = await replicas(2)
    r = await doomed.registry.acquire(scope(), view(3), 2.0, None)
    assert r.lease
    assert doomed.tier is not None
    for task in doomed._tasks:  # stops its heartbeat: as dead as kill -9 for the tier
        task.cancel()
    await live.registry.resolve(r.lease)

    async def adopted() -> bool:
        return live.tier is not None and live.tier.report.adopted == 1

    await _until(adopted)
    await live.registry.resolve(r.lease)  # still served, by the live replica

    async def expired() -> bool:
        await live.janitor.drain()
        return not await _sim(live).live_names_shared() and await live.registry.entry_count() == 0

    await _until(expired)


async def test_redis_restarted_empty_is_reconciled_from_the_provider(replicas, redis_prefix: str) -> None:
    a, b = await replicas(2)
    for n in (2, 3, 4):
        assert (await a.registry.acquire(scope(user=f"u{n}"), view(n), None, None)).lease
    assert len(await _sim(a).live_names_shared()) == 3
    support.delete_prefix(redis_prefix)  # the service's keys only; the provider's state stays

    async def reconciled() -> bool:
        await a.janitor.drain()
        await b.janitor.drain()
        return not await _sim(a).live_names_shared()

    await _until(reconciled)
    # The tier works on: a new create, known to both replicas.
    r = await b.registry.acquire(scope(), view(3), None, None)
    await a.registry.resolve(r.lease)
    await asyncio.sleep(0.5)  # sweeps run meanwhile; a known cache is never reconciled away
    assert len(await _sim(a).live_names_shared()) == 1
