"""Rule 8's loss accounts live in the registry's store (domain.policy,
``Booking``): every store applies a booking as ``Account.apply`` does, and
replicas on one Redis book on one account per scope, so N replicas do not
give a scope N allowances. Both stores (tests/cache/conftest.py)."""

from __future__ import annotations

import random

from cache_service.domain.model import CacheState, Usage
from cache_service.domain.policy import PAID_KEPT, Booking, Ledger, PolicySettings, settle_booking
from cache_service.domain.pricing import cache_prices
from cache_service.providers.local import LocalProvider
from tests.cache.support import prefix, scope

NAMED = cache_prices("named")


def _head(i: int) -> dict[str, object]:
    return {"role": "", "parts": [{"text": f"Agent {i} works alone here. " * 40}]}


async def test_each_store_books_as_the_pure_account_does(harness_factory, clock) -> None:
    """A random run of credits and NAMED settlements over more entries than
    an account remembers: the store's balances are the pure Ledger's."""
    h = await harness_factory()
    store, sfp = h.registry.store, scope(user="books").fingerprint
    pure = Ledger(500.0, 0.02)
    rng = random.Random(7)
    for step in range(3 * PAID_KEPT):
        now = 1000.0 + 7.0 * step
        if rng.random() < 0.3:
            booking = Booking(rng.uniform(-50.0, 50.0), now)
        else:
            booking = settle_booking(NAMED, cached=rng.randint(0, 3000), written=rng.choice([0, 3000]),
                                     ttl_s=rng.choice([300.0, 3600.0]), entry_id=f"e{rng.randint(0, PAID_KEPT + 8)}",
                                     entry_tokens=3000, created=rng.random() < 0.2, now=now)
        expected = pure.book(sfp, booking)
        assert abs(await store.book_loss(sfp, booking, 500.0, 3600.0) - expected) < 1e-6 * max(1.0, abs(expected))
    assert abs(await store.loss_balance(sfp, 500.0, 3600.0, now) - pure.balance(sfp)) < 1e-6 * abs(pure.balance(sfp))
    assert await store.loss_balance(scope(user="fresh").fingerprint, 500.0, 3600.0, now) == 500.0


async def test_replicas_book_on_one_account(harness_factory, registry_state, clock) -> None:
    """Two registries (replicas): a write one of them settles takes the
    scope into deficit for both on a shared store, so the other writes no
    new first sighting; on two memory stores each replica has its own."""
    policy = PolicySettings(min_prefix_tokens=64, loss_allowance_tokens=100.0, loss_tolerance=0.0)
    a = await harness_factory(policy=policy, provider=LocalProvider(name="local-anthropic", clock=clock,
                                                                    min_cache_tokens=64))
    b = await harness_factory(policy=policy, provider=LocalProvider(name="local-anthropic", clock=clock,
                                                                    min_cache_tokens=64))
    s = scope(provider="local-anthropic", user="replicas")
    first = await a.acquire(prefix(1, system=_head(0)), s)
    assert first.info.state is CacheState.CREATED
    entry = await a.registry.store.get(first.entry_id)
    assert entry is not None
    await a.registry.admission.settle(a.provider, entry, Usage(prompt_tokens=entry.tokens,
                                                               cache_write_tokens=entry.tokens), True)
    assert await a.registry.admission.balance(s.fingerprint) < 0, "a quarter of the write is over the allowance"
    shared = registry_state is not None
    assert (await b.registry.admission.balance(s.fingerprint) < 0) is shared
    clock.advance(1)
    second = await b.acquire(prefix(1, system=_head(1)), s)
    assert second.info.state is (CacheState.BYPASS if shared else CacheState.CREATED)


async def test_an_account_is_kept_for_keep_s(harness_factory, registry_state) -> None:
    """An account not booked for ``keep_s`` opens afresh: the memory store
    by the bookings' wall clock, Redis by the key's expiry."""
    h = await harness_factory()
    store, sfp = h.registry.store, scope(user="kept").fingerprint
    assert await store.book_loss(sfp, Booking(-150.0, 1000.0), 100.0, 600.0) == -50.0
    if registry_state is None:
        assert await store.loss_balance(sfp, 100.0, 600.0, 1599.0) == -50.0
        assert await store.loss_balance(sfp, 100.0, 600.0, 1600.0) == 100.0
        assert await store.book_loss(sfp, Booking(-10.0, 1700.0), 100.0, 600.0) == 90.0
        return
    from cache_service.cluster.names import Names
    from tests.cluster import support

    backend, key_prefix = registry_state
    expires_ms = support.sync_client(backend).pttl(Names(key_prefix).loss_account(sfp))
    assert 0 < expires_ms <= 600_000
