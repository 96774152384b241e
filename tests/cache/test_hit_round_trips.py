"""A warm lease hit costs one store round trip: the match with the
sighting, the credit, the lease and the holder's use; a match the policy
weighs goes on as before, its lease a second step (docs/ARCHITECTURE.md,
"The tier on Redis"). Counted, not timed: on Redis each step is one
command, so a change that adds a round trip to every hit fails here by its
count. And the step takes exactly the hits the policy serves as they are,
on the memory store, Redis and the Redis Cluster alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cache_service.cluster.store import RedisRegistryStore
from cache_service.domain import policy
from cache_service.domain.entry import Entry, new_entry_id
from cache_service.domain.model import CacheHandle, CacheState, ResourceName
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import HitLease, HitTerms, LossCredit
from cache_service.domain.pricing import cache_prices
from tests.cache.support import scope, view

pytestmark = pytest.mark.redis_cluster

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)
STORE_STEPS = (
    "get", "first_match", "match_and_record_sighting", "match_and_take_hit", "scope_entries", "all_entries", "count", "next_generation",
    "put", "retire", "remove", "tombstone", "add_lease", "lease_and_swap_holder", "drop_lease", "swap_holder",
    "holders", "drop_expired_leases", "set_expiry", "least_recently_used_idle", "record_sighting",
    "forget_sightings", "learned_floor", "learn_floor", "lower_floor", "report_create", "book_loss", "loss_balance",
)


class Counts:
    """Store steps (outermost port calls: a step the memory store composes
    of others counts once) and Redis commands (a pipeline counts once)."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.commands: list[str] = []
        self._depth = 0

    def step(self, name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if not self._depth:
                self.steps.append(name)
            self._depth += 1
            try:
                return await method(*args, **kwargs)
            finally:
                self._depth -= 1
        return counted

    def command(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.commands.append(str(args[0]))
            return await method(*args, **kwargs)
        return counted

    def pipeline(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.commands.append("PIPELINE")
            return method(*args, **kwargs)
        return counted

    def clear(self) -> None:
        self.steps.clear()
        self.commands.clear()


def _count(h: Any, monkeypatch: pytest.MonkeyPatch) -> Counts:
    counts = Counts()
    store = h.registry.store
    for name in STORE_STEPS:
        monkeypatch.setattr(store, name, counts.step(name, getattr(store, name)))
    if isinstance(store, RedisRegistryStore):
        # Floors and first-sighting pools are re-read every few seconds of
        # the replica's clock: on the harness's, the counted hits fall in
        # the window the warm-up opened, however slow the machine.
        monkeypatch.setattr(store, "_monotonic", h.clock.monotonic)
        client = store._r
        monkeypatch.setattr(client, "execute_command", counts.command(client.execute_command))
        monkeypatch.setattr(client, "pipeline", counts.pipeline(client.pipeline))
    return counts


async def _created(h: Any, v: Any, holder: str) -> Any:
    """The cache of ``v``, created by ``holder`` and released."""
    created = await h.registry.acquire(scope(), v, None, None, holder)
    assert created.info.state is CacheState.CREATED
    assert await h.registry.release(created.lease)
    return created


@pytest.mark.parametrize("holder", ["conversation-1", ""])
async def test_a_warm_hit_is_one_store_round_trip(harness_factory, monkeypatch, holder) -> None:
    h = await harness_factory(policy=EAGER)
    counts = _count(h, monkeypatch)
    created = await _created(h, view(3), holder)
    # The first hit resolves the create's first sighting (its outcome
    # pushed to the pools) and loads the scripts: a warm-up.
    warm = await h.registry.acquire(scope(), view(3), None, None, holder)
    assert warm.info.state is CacheState.HIT
    assert await h.registry.release(warm.lease)

    counts.clear()
    hit = await h.registry.acquire(scope(), view(3), None, None, holder)
    assert hit.info.state is CacheState.HIT and hit.entry_id == created.entry_id
    # The credit on the scope's loss account and the lease (with the
    # holder's use) ride the match's step; the floor is not read.
    assert counts.steps == ["match_and_take_hit"]
    if isinstance(h.registry.store, RedisRegistryStore):
        assert counts.commands == ["EVALSHA"], "one script, nothing else"
    if holder:
        # The step recorded the holder's use as swap_holder would have.
        users = await h.registry.store.holders(hit.entry_id)
        assert set(users.last_use) == {holder} and users.named_uses == 3
    after = await h.registry.store.get(hit.entry_id)
    assert after is not None and after.uses == 3 and after.generation == created.claims.generation
    assert hit.claims.lease_id in after.leases and hit.info.uses == 3


@pytest.mark.parametrize("holder", ["conversation-1", ""])
async def test_a_match_the_policy_weighs_is_leased_in_a_second_step(harness_factory, monkeypatch, holder) -> None:
    h = await harness_factory(policy=EAGER)
    counts = _count(h, monkeypatch)
    created = await _created(h, view(1), holder)
    uses = (await h.registry.store.get(created.entry_id)).uses

    counts.clear()
    # Five turns over one: the policy weighs a grow, in Python, after the
    # step, and grows (the sightings say the conversation goes on).
    grown = await h.registry.acquire(scope(), view(6), None, None, holder)
    assert grown.info.state is CacheState.GROWN
    assert counts.steps[:2] == ["match_and_take_hit", "learned_floor"]
    old = await h.registry.store.get(created.entry_id)
    assert old is None or old.uses == uses, "the first step leased nothing"


def _entry(s: Any, v: Any, history_len: int, tokens: int, generation: int, expire_time: float,
           ttl_s: float = 300.0) -> Entry:
    sfp = s.fingerprint
    entry_id = new_entry_id(sfp)
    return Entry(id=entry_id, generation=generation, scope=s, scope_fp=sfp, ttl_s=ttl_s,
                 prefix_fp=f"p{history_len}", history_len=history_len, digest=v.chain[history_len], tokens=tokens,
                 size_bytes=4 * tokens, handle=CacheHandle(ResourceName(f"cachedContents/{entry_id}"), expire_time),
                 last_used=0.0)


# (entries as (history length, tokens, seconds left, retiring), request tokens, opening balance, head floor, head
# share): the request is over 8 contents (view(4)); the grow share is 0.25.
CASES = [
    ([(8, 900, 100, False)], 900, 4096.0, 0, 0.25),  # the whole prefix
    ([(6, 800, 100, False)], 900, 4096.0, 0, 0.25),  # 100 left to grow: under a quarter of 800
    ([(6, 800, 100, False)], 1001, 4096.0, 0, 0.25),  # 201 left: weighed
    ([(6, 800, 100, False)], 1000, 4096.0, 0, 0.25),  # 200 left: exactly a quarter
    ([(6, 800, 100, False)], 1001, -9000.0, 0, 0.25),  # weighed, but the account is in deficit
    ([(6, 800, 1, False), (2, 700, 100, False)], 800, 4096.0, 0, 0.25),  # the longer one within the margin
    ([(6, 800, 1, False), (2, 300, 100, False)], 800, 4096.0, 0, 0.25),  # so the shorter one, weighed
    ([(0, 300, 100, False)], 301, 4096.0, 0, 0.0),  # a head alone (marked: no share), weighed
    ([(0, 300, 100, False)], 300, 4096.0, 500, 0.0),  # a head below the floor, the account in credit
    ([(0, 300, 100, False)], 300, -9000.0, 500, 0.0),  # the same in deficit: the call goes uncached
    ([(0, 600, 100, False)], 300, -9000.0, 500, 0.0),  # a head over the floor in deficit
    ([(4, 500, 100, False)], 600, 4096.0, 0, 0.25),
    ([(4, 500, 20, False)], 600, 4096.0, 0, 0.25),  # the lease outlives the cache: its expiry is the cache's
]


@pytest.mark.parametrize("holder", ["conversation-1", ""])
async def test_the_step_takes_the_hits_the_policy_serves_as_they_are(harness_factory, holder) -> None:
    h = await harness_factory(policy=EAGER)
    store, clock = h.registry.store, h.clock
    v = view(4)
    ttls = (300.0,)
    keys = [(d, t) for d in reversed(v.chain) for t in ttls]
    answers = []
    for i, (entries, tokens, opening, head_floor, head_share) in enumerate(CASES):
        s = scope(user=f"case-{i}")
        wall = clock.wall()
        put = []
        for history_len, entry_tokens, left, retiring in entries:
            entry = _entry(s, v, history_len, entry_tokens, await store.next_generation(), wall + left)
            await store.put(entry)
            if retiring:
                await store.retire(entry.id)
            put.append(entry.id)

        def usable(e: Entry, wall: float = wall) -> bool:
            return not e.retiring and e.handle.expire_time - min(2.0, e.ttl_s / 10) > wall

        before = {e.id: e for e in [await store.get(i) for i in put] if e is not None}
        before = {k: (e.uses, dict(e.leases), e.generation) for k, e in before.items()}
        lease = HitLease(f"lease-{i}", wall, wall + 30.0, clock.monotonic() + i, holder, wall, 600.0)
        terms = HitTerms(tokens=tokens, history_len=v.history_len, grow_share=0.25, head_share=head_share,
                         head_floor=head_floor, wall=wall, expiry_margin_s=2.0, lease=lease)
        credit = LossCredit(policy.credit_booking(0.02, tokens, wall), opening, 600.0)
        first = await store.first_match(s.fingerprint, keys, usable)
        match, _, balance, taken = await store.match_and_take_hit(s.fingerprint, keys, usable, v.chain, wall, 600.0,
                                                                  "", credit, terms)
        assert balance == pytest.approx(opening + 0.02 * tokens)
        assert first is not None
        expected = terms.takes(first, balance)
        assert (taken is not None) is expected, f"case {i}"
        answers.append(expected)
        assert match is not None and match.id == first.id, f"case {i}"
        after = await store.get(first.id)
        assert after is not None
        uses, leases, generation = before[first.id]
        assert after.generation == generation
        if taken is None:
            assert (after.uses, after.leases) == (uses, leases), f"case {i}: nothing leased"
            continue
        assert taken.entry.id == first.id and taken.entry.uses == after.uses == uses + 1, f"case {i}"
        assert after.leases == {**leases, lease.lease_id: min(first.handle.expire_time, lease.until)}
        assert after.last_used == lease.now
        users = await store.holders(first.id)
        if holder:
            assert taken.previous == "" and users.last_use == {holder: wall} and users.named_uses == 1
        else:
            assert taken.previous is None and users.named_uses == 0
    assert answers == [True, True, False, True, True, True, False, False, True, False, True, True, True]


def test_the_terms_are_the_policys() -> None:
    """HitTerms.takes is policy.decide's HIT without weighing a grow (and
    not a head below the floor in deficit), whatever the evidence."""
    s = scope()
    v = view(4)
    strong = policy.Evidence(1.0, (1.0,) * 16, True, (1.0,) * 16, 1.0)
    for kind in ("marked", "named", "automatic"):
        prices = cache_prices(kind, model="gemini-2.5-flash")
        settings = policy.PolicySettings(min_prefix_tokens=64)
        for history_len in (0, 2, 4, 8):
            for cached in (100, 300, 800):
                for tokens in (cached, cached + 50, int(cached * 1.25), cached + 400, 4000):
                    for budget in (-1.0, 10.0):
                        entry = _entry(s, v, history_len, cached, 1, 1e12)
                        terms = HitTerms(tokens, v.history_len, policy.grow_share(kind, 1, settings),
                                         policy.grow_share(kind, 0, settings), 0, 0.0, 2.0,
                                         HitLease("l", 0.0, 1.0, 0.0))
                        decision = policy.decide(
                            empty=False, tokens=tokens, history_len=v.history_len, floor=64, budget=budget,
                            match=policy.CachedPrefix(cached, history_len), evidence=strong, prices=prices,
                            ttls=(300.0,), settings=settings)
                        if terms.takes(entry, budget):
                            assert decision.action is policy.Action.HIT
                        else:
                            assert decision.action is policy.Action.GROW, (kind, history_len, cached, tokens, budget)
