"""``max_entries`` across the registry's shards (cluster.names): a claim
reads the other shards, then reserves its slot in its own shard's script.
One replica's claims never race each other (exact bound); claims of R
replicas racing over several shards pass the bound by at most R - 1
(cluster.single_flight). On the single Redis and on the Redis Cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from cache_service.cluster.client import redis_client
from cache_service.cluster.names import Names
from cache_service.cluster.single_flight import RedisSingleFlight
from cache_service.domain.entry import scope_shard
from cache_service.domain.flight import Claim, Flight
from tests.cache.support import scope, view
from tests.cluster import support

pytestmark = [pytest.mark.redis, pytest.mark.redis_cluster]


@pytest.fixture
async def coordinators(redis_prefix: str, redis_backend: str) -> AsyncIterator[Callable[..., RedisSingleFlight]]:
    """``make(max_entries)``: a replica's single flight on its own client."""
    made: list[tuple[RedisSingleFlight, Any]] = []

    def make(max_entries: int) -> RedisSingleFlight:
        client = redis_client(support.url_of(redis_backend))
        flights = RedisSingleFlight(client, Names(redis_prefix), max_entries=max_entries, claim_s=30.0, slot_s=30.0)
        made.append((flights, client))
        return flights

    yield make
    for flights, client in made:
        await flights.close()
        await client.aclose()


def _flights(n: int, tag: str) -> list[Flight]:
    """Flights of ``n`` scopes, spread over every shard."""
    v = view(2)
    out = []
    for i in range(n):
        s = scope(user=f"{tag}-{i}")
        out.append(Flight((v.digest, 300.0), s, s.fingerprint, v, 300.0, None))
    return out


async def test_one_replicas_claims_stop_exactly_at_the_bound(coordinators) -> None:
    flights = coordinators(5)
    mine = _flights(8, "seq")
    assert len({scope_shard(f.scope_fp) for f in mine[:5]}) > 1  # the bound is counted across shards
    claims = [await flights.begin(f) for f in mine]
    assert claims == [Claim.WON] * 5 + [Claim.FULL] * 3
    # A create that ends frees its slot for the next claim.
    mine[0].outcome = ""
    await flights.end(mine[0])
    assert await flights.begin(mine[5]) is Claim.WON


async def test_racing_replicas_pass_the_bound_by_at_most_one_claim_each_but_one(coordinators) -> None:
    replicas = [coordinators(4) for _ in range(3)]
    batches = [_flights(8, f"r{r}") for r in range(3)]
    claims = await asyncio.gather(*(flights.begin(f) for flights, batch in zip(replicas, batches, strict=True)
                                    for f in batch))
    won = claims.count(Claim.WON)
    assert 4 <= won <= 4 + (3 - 1)
    assert set(claims) <= {Claim.WON, Claim.FULL}
    # Once they are in, every replica finds the tier full.
    for flights in replicas:
        assert await flights.begin(_flights(1, "late")[0]) is Claim.FULL
