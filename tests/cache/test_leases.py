"""Leases are opaque, unforgeable, scope-bound and generation-checked: a
forged, tampered, expired, invalidated, evicted, released, other-scope or
earlier-process lease is refused, each with its own reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentctx_common.errors import PermissionDenied
from cache_service.domain.leases import LeaseSigner
from cache_service.domain.model import LeaseClaims
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import LeaseRejected, SigningKey
from tests.cache.support import scope, view

# The store and single-flight conformance: on the Redis Cluster as well (tests/cache/conftest.py).
pytestmark = pytest.mark.redis_cluster

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)


async def _reason(registry, lease: str, scope_fp: str | None = None) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(LeaseRejected) as err:
        await registry.resolve(lease, scope_fp)
    return err.value.invalid_reason


async def test_a_lease_carries_no_resource_name(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    r = await h.acquire(view(3))
    name = (await h.registry.entries())[0].handle.name.reveal()
    assert name.startswith("cachedContents/")
    assert name not in r.lease and "cachedContents" not in r.lease
    import base64
    payload = r.lease.split(".")[1]
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    assert "cachedContents" not in decoded and "loc-" not in decoded


async def test_forged_and_tampered_leases_are_malformed(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    r = await h.acquire(view(3))
    assert await _reason(h.registry, "") == "MALFORMED"
    assert await _reason(h.registry, "not-a-lease") == "MALFORMED"
    assert await _reason(h.registry, "v1.e30.AAAA") == "MALFORMED"
    version, payload, mac = r.lease.split(".")
    assert await _reason(h.registry, f"{version}.{payload[:-2]}xy.{mac}") == "MALFORMED"
    assert await _reason(h.registry, f"{version}.{payload}.{mac[:-2]}AA") == "MALFORMED"
    # A lease signed with another key over the same claims.
    forger = LeaseSigner(boot=h.registry.signer.boot)
    claims = h.registry.signer.verify(r.lease)
    assert await _reason(h.registry, forger.sign(claims)) == "MALFORMED"


@settings(max_examples=60, deadline=None)
@given(position=st.integers(min_value=0), replacement=st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."))
def test_any_single_character_change_is_refused(position: int, replacement: str) -> None:
    signer = LeaseSigner()
    lease = signer.sign(LeaseClaims(signer.boot, "e1", 1, "f" * 64, "l1", 2e9, "HIT"))
    i = position % len(lease)
    if lease[i] == replacement:
        return
    tampered = lease[:i] + replacement + lease[i + 1:]
    try:
        claims = signer.verify(tampered)
    except LeaseRejected:
        return
    # base64 can decode two spellings to the same bytes: then nothing changed.
    assert claims == signer.verify(lease)


class _RotatingKeys:
    """A KeySource that signs with its newest key and still verifies the
    ones it retired, as a key set shared by replicas would."""

    def __init__(self) -> None:
        self.keys = [SigningKey("k1", b"1" * 32)]

    def rotate(self, key: SigningKey) -> None:
        self.keys.append(key)

    def current(self) -> SigningKey:
        return self.keys[-1]

    def get(self, key_id: str) -> SigningKey | None:
        return next((k for k in self.keys if k.key_id == key_id), None)


def test_leases_signed_with_a_retired_key_still_verify_and_unknown_keys_do_not() -> None:
    keys = _RotatingKeys()
    signer = LeaseSigner(keys=keys)
    old = signer.sign(LeaseClaims(signer.boot, "e1", 1, "f" * 64, "l1", 2e9, "HIT"))
    keys.rotate(SigningKey("k2", b"2" * 32))
    new = signer.sign(LeaseClaims(signer.boot, "e1", 1, "f" * 64, "l2", 2e9, "HIT"))
    assert signer.verify(old).boot == "k1" and signer.verify(new).boot == "k2"
    # Another replica with the same key set verifies both.
    assert LeaseSigner(keys=keys).verify(old) == signer.verify(old)
    keys.keys = keys.keys[1:]  # k1 dropped from the set
    with pytest.raises(LeaseRejected) as err:
        signer.verify(old)
    assert err.value.invalid_reason == "UNKNOWN"
    # A key id the set holds but a secret it does not: forged.
    forged = _RotatingKeys()
    forged.keys = [SigningKey("k2", b"x" * 32)]
    forger = LeaseSigner(keys=forged)
    with pytest.raises(LeaseRejected) as err:
        signer.verify(forger.sign(LeaseClaims("k2", "e1", 1, "f" * 64, "l3", 2e9, "HIT")))
    assert err.value.invalid_reason == "MALFORMED"


async def test_a_lease_of_an_earlier_process_is_unknown(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    earlier = LeaseSigner()
    lease = earlier.sign(LeaseClaims(earlier.boot, "e1", 1, scope().fingerprint, "l1", h.clock.wall() + 60, "HIT"))
    assert await _reason(h.registry, lease) == "UNKNOWN"


async def test_an_expired_lease_is_refused(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, lease_ttl_s=30)
    r = await h.acquire(view(3))
    await h.registry.resolve(r.lease)
    h.clock.advance(31)
    assert await _reason(h.registry, r.lease) == "EXPIRED"


async def test_a_lease_on_an_expired_cache_is_refused(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    r = await h.acquire(view(3))
    h.clock.advance(301)
    assert await _reason(h.registry, r.lease) == "EXPIRED"
    await h.registry.sweep()
    assert await _reason(h.registry, r.lease) == "EXPIRED"


async def test_invalidated_and_evicted_leases_are_refused(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, max_entries=1)
    r = await h.acquire(view(3))
    await h.registry.invalidate(scope())
    assert await _reason(h.registry, r.lease) == "INVALIDATED"
    # A new cache for the same key is a new generation: the old lease stays dead.
    again = await h.acquire(view(3))
    assert again.lease
    assert await _reason(h.registry, r.lease) == "INVALIDATED"
    await h.registry.release(again.lease)
    other = await h.acquire(view(3), scope(user="other"))
    assert other.lease  # evicted the idle cache
    assert await _reason(h.registry, again.lease) == "INVALIDATED"


async def test_a_released_lease_is_refused_and_release_is_idempotent(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    r = await h.acquire(view(3))
    assert (await h.registry.release(r.lease)) is True
    assert (await h.registry.release(r.lease)) is False
    assert await _reason(h.registry, r.lease) == "UNKNOWN"
    assert (await h.registry.release("garbage")) is False


async def test_a_lease_of_another_scope_is_permission_denied(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    r = await h.acquire(view(3), scope(user="a"))
    with pytest.raises(PermissionDenied) as err:
        await h.registry.resolve(r.lease, scope(user="b").fingerprint)
    assert err.value.reason == "LEASE_SCOPE_MISMATCH"
