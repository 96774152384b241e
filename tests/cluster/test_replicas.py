"""Several cache-service replicas on one Redis: one registry, one create
per prefix across replicas, leases valid on every replica, shared bounds,
names sealed at rest, and the refusals of an unsafe configuration."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from agentctx_common.errors import ConfigError
from cache_service.app import CacheApp
from cache_service.cluster.names import Names
from cache_service.domain.keys import PrefixView
from cache_service.domain.model import CacheState, ModelCall
from cache_service.domain.ports import LeaseRejected
from cache_service.providers.local import SharedLocalProvider
from cache_service.settings import CacheSettings
from tests.cache.support import MODEL, scope, view
from tests.cluster import support

# The core lease and single-flight tests: on the Redis Cluster as well (conftest.py).
pytestmark = [pytest.mark.redis, pytest.mark.redis_cluster]


async def _acquire(app: CacheApp, v: PrefixView, **kw: object):  # type: ignore[no-untyped-def]
    return await app.registry.acquire(scope(**kw), v, None, None)  # type: ignore[arg-type]


def _sim(app: CacheApp) -> SharedLocalProvider:
    provider = app.providers["local"]
    assert isinstance(provider, SharedLocalProvider)
    return provider


async def test_a_lease_from_one_replica_resolves_and_releases_on_another(replicas) -> None:
    a, b = await replicas(2)
    r = await _acquire(a, view(3))
    assert r.info.state is CacheState.CREATED
    entry, claims = await b.registry.resolve(r.lease, scope().fingerprint)
    assert claims.entry_id == entry.id
    # The cache B serves is the one A created, at the one shared provider.
    reply = await _sim(b).generate(_call(), entry.handle.name)
    assert reply.usage is not None and reply.usage.cached_prompt_tokens > 0
    hit = await _acquire(b, view(3))
    assert hit.info.state is CacheState.HIT
    assert await b.registry.release(r.lease)


@pytest.mark.redis_single  # heavy (three replicas in one loop): on the cluster, tests/cache/test_registry's 256 misses
async def test_256_concurrent_misses_over_three_replicas_make_one_create(replicas) -> None:
    # Nothing dies here: claims and heartbeats that a busy loop (256 calls
    # on one event loop, a loaded machine) renews late must not be taken
    # for a dead leader's (test_flight_takeover covers that). Nor may the
    # waiters' deadline (the create's, plus 1 s): at load 12 the 256 calls
    # took longer than the default 6 s to be answered, and left as BYPASS
    # DEADLINE_EXCEEDED.
    apps = await replicas(3, max_waiters=256, flight_claim_s=30.0, replica_dead_after_s=30.0, create_timeout_s=60.0)
    v = view(4)
    results = await asyncio.gather(*(_acquire(apps[i % 3], v) for i in range(256)))
    assert (await _sim(apps[0]).stats())["create"] == 1
    states = [r.info.state for r in results]
    bypassed = [r.info.bypass_reason.name for r in results if r.info.state is CacheState.BYPASS]
    assert states.count(CacheState.CREATED) == 1 and states.count(CacheState.HIT) == 255, bypassed[:3]
    leases = {r.lease for r in results}
    assert len(leases) == 256
    for i, lease in enumerate(sorted(leases)[:9]):
        await apps[i % 3].registry.resolve(lease)


async def test_the_entry_bound_holds_across_replicas(replicas) -> None:
    # As above: no replica dies, so none may be taken for dead when a loaded
    # machine delays its heartbeat or its claim's renewal; nor may a slow
    # create's reserved slot (kept create_timeout_s + 2 s) lapse while it
    # runs, which lets one more claim through (5 creates, seen once under
    # the parallel suite at load 4 to 8).
    apps = await replicas(3, max_entries=2, flight_claim_s=30.0, replica_dead_after_s=30.0, create_timeout_s=60.0)
    results = await asyncio.gather(*(_acquire(apps[i % 3], view(3), user=f"u{i}") for i in range(6)))
    created = [r for r in results if r.info.state is CacheState.CREATED]
    # Installed plus in-flight creates of every replica stay within the
    # bound and its tolerance, one per other replica (cluster.single_flight).
    assert 1 <= len(created) <= 2 + (3 - 1)
    assert {r.info.bypass_reason.value for r in results if r.info.state is CacheState.BYPASS} <= {"CAPACITY"}
    # A create past the bound (the tolerance) evicted an idle entry, if any: none is left unknown.
    count = await apps[0].registry.entry_count()
    assert count <= len(created) and count <= 2 + (3 - 1)

    async def settled() -> bool:
        return len(await _sim(apps[0]).live_names_shared()) == count

    await support.until(settled)


async def test_invalidate_on_one_replica_invalidates_the_leases_of_another(replicas) -> None:
    a, b = await replicas(2)
    r = await _acquire(b, view(3))
    await a.registry.invalidate(scope())
    with pytest.raises(LeaseRejected) as err:
        await b.registry.resolve(r.lease)
    assert err.value.invalid_reason == "INVALIDATED"
    # Re-created under a new generation: the old lease stays invalid.
    again = await _acquire(a, view(3))
    assert again.info.state is CacheState.CREATED
    with pytest.raises(LeaseRejected):
        await a.registry.resolve(r.lease)
    await a.janitor.drain()
    assert len(await _sim(a).live_names_shared()) == 1


async def test_leases_survive_a_key_rotation_across_replicas(replicas) -> None:
    (old,) = await replicas(1)
    r = await _acquire(old, view(3))
    keys = [*support.LEASE_KEYS, {"id": "k2", "secret": "t" * 40}]
    (rotated,) = await replicas(1, lease_keys=keys, active_lease_key_id="k2")
    await rotated.registry.resolve(r.lease)  # signed with k1, still in the set
    new = await _acquire(rotated, view(3))
    assert rotated.registry.signer.verify(new.lease).boot == "k2"
    with pytest.raises(LeaseRejected) as err:
        await old.registry.resolve(new.lease)  # k2 is not in the old replica's set yet
    assert err.value.invalid_reason == "UNKNOWN"


async def test_a_holder_that_died_blocks_a_key_no_longer_than_its_lock(replicas, redis_prefix: str,
                                                                       redis_backend: str) -> None:
    (a,) = await replicas(1)
    v = view(3)
    lock = Names(redis_prefix).lock(scope().fingerprint, (v.digest, 300.0))
    client = support.sync_client(redis_backend)
    client.set(lock, "dead-replica", px=600)
    r = await _acquire(a, v)
    assert r.info.state is CacheState.CREATED
    assert (await _sim(a).stats())["create"] == 1


async def test_nothing_in_redis_names_a_provider_resource(replicas, redis_prefix: str, redis_backend: str) -> None:
    a, b = await replicas(2)
    leases = [await _acquire(a, view(n)) for n in (2, 3, 5)]
    await b.registry.resolve(leases[0].lease)
    names = await _sim(a).live_names_shared()
    assert names
    dump = b"\n".join(support.dump_prefix(redis_prefix, redis_backend))
    assert b"cachedContents" not in dump
    for name in names:
        assert name.encode() not in dump and name.split("/")[-1].encode() not in dump


def test_redis_without_an_encryption_key_or_a_key_set_is_refused(certs_dir: pathlib.Path,
                                                                 tmp_path: pathlib.Path) -> None:
    base = dict(redis_url=support.REDIS_URL, redis_encryption_key=support.ENCRYPTION_KEY,
                lease_keys=support.LEASE_KEYS, active_lease_key_id="k1")
    CacheSettings.load(**_tls(certs_dir, tmp_path), **base)
    for drop, needle in (("redis_encryption_key", "redis_encryption_key"), ("lease_keys", "lease_keys")):
        values = {k: v for k, v in base.items() if k != drop and not (drop == "lease_keys" and k == "active_lease_key_id")}
        with pytest.raises(ConfigError, match=needle):
            CacheSettings.load(**_tls(certs_dir, tmp_path), **values)
    with pytest.raises(ConfigError, match="32 bytes"):
        CacheSettings.load(**_tls(certs_dir, tmp_path), **{**base, "redis_encryption_key": "c2hvcnQ="})


def _tls(certs: pathlib.Path, tmp: pathlib.Path) -> dict[str, object]:
    return dict(tls_cert=certs / "cache-server.pem", tls_key=certs / "cache-server.key",
                tls_client_ca=certs / "ca.pem", data_dir=tmp)


def _call() -> ModelCall:
    """A call over a cache: only the uncached suffix."""
    return ModelCall(model=MODEL, contents=({"role": "user", "parts": [{"text": "and now?"}]},))
