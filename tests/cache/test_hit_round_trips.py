"""A lease hit costs two store round trips: the match with the sighting,
then the lease with the holder's use (docs/ARCHITECTURE.md, "The tier on Redis").
Counted, not timed: on Redis each step is one command, so a change that
adds a round trip to every hit fails here by its count. On the memory store,
Redis and the Redis Cluster."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cache_service.cluster.store import RedisRegistryStore
from cache_service.domain.model import CacheState
from cache_service.domain.policy import PolicySettings
from tests.cache.support import scope, view

pytestmark = pytest.mark.redis_cluster

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)
STORE_STEPS = (
    "get", "first_match", "match_and_record_sighting", "scope_entries", "all_entries", "count", "next_generation",
    "put", "retire", "remove", "tombstone", "add_lease", "lease_and_swap_holder", "drop_lease", "swap_holder",
    "holders", "drop_expired_leases", "set_expiry", "least_recently_used_idle", "record_sighting",
    "forget_sightings", "learned_floor", "learn_floor", "book_loss", "loss_balance",
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


@pytest.mark.parametrize("holder", ["conversation-1", ""])
async def test_a_hit_is_two_store_round_trips(harness_factory, monkeypatch, holder) -> None:
    h = await harness_factory(policy=EAGER)
    counts = _count(h, monkeypatch)
    created = await h.registry.acquire(scope(), view(3), None, None, holder)
    assert created.info.state is CacheState.CREATED
    assert await h.registry.release(created.lease)
    # The first hit resolves the create's first sighting (its outcome
    # pushed to the pools) and loads the scripts: a warm-up.
    warm = await h.registry.acquire(scope(), view(3), None, None, holder)
    assert warm.info.state is CacheState.HIT
    assert await h.registry.release(warm.lease)

    counts.clear()
    hit = await h.registry.acquire(scope(), view(3), None, None, holder)
    assert hit.info.state is CacheState.HIT and hit.entry_id == created.entry_id
    # The floor is a replica's own between reads (no command on Redis); the
    # credit on the scope's loss account rides the first step.
    expected = ["match_and_record_sighting", "learned_floor", "lease_and_swap_holder" if holder else "add_lease"]
    assert counts.steps == expected
    if isinstance(h.registry.store, RedisRegistryStore):
        assert counts.commands == ["EVALSHA", "EVALSHA"], "one script per step, nothing else"
    if holder:
        # The step recorded the holder's use as swap_holder would have.
        users = await h.registry.store.holders(hit.entry_id)
        assert set(users.last_use) == {holder} and users.named_uses == 3
