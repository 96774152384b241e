"""GenerateContent with ``acquire``: one call acquires a lease on its own
prefix, calls the model with it and releases it; its record is what the
three calls would have told; a lease refused in between (an invalidation)
sends the call uncached. The domain on both stores, then the RPC."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.type.v1 import cache_pb2
from agentctx_common.status import error_from_rpc
from cache_service.api import convert
from cache_service.domain import generation
from cache_service.domain.call_lease import CallLease, CallLeases
from cache_service.domain.generation import Generator
from cache_service.domain.keys import PrefixView
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import PolicySettings
from tests.cache import protos
from tests.cache.support import call_over, prefix, scope

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)
ONE = CallLease(suffix=1, holder="h1")


def _leases(h: Any) -> CallLeases:
    return CallLeases(h.registry, Generator(h.registry), 4.0)


async def test_one_call_acquires_uses_and_releases(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    calls = _leases(h)
    p = prefix(3)
    reply, info = await calls.generate(scope(), call_over(p), ONE, 10.0)
    assert info.state is CacheState.CREATED and info.prefix_fingerprint == PrefixView.of(p).fingerprint
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == info.prefix_tokens
    reply, info = await calls.generate(scope(), call_over(p, "and then?"), ONE, 10.0)
    assert info.state is CacheState.HIT and info.uses == 2
    chunks = [item async for item in calls.stream(scope(), call_over(p, "streamed?"), ONE, 10.0)]
    assert chunks[-1][1] is not None and chunks[-1][1].state is CacheState.HIT
    assert all(i is None for _, i in chunks[:-1])
    (entry,) = await h.registry.entries()
    assert entry.leases == {}, "every call released its lease"
    assert (h.provider.counts["generate"], h.provider.counts["stream"]) == (2, 1)


async def test_a_calls_own_lease_is_used_by_its_claims(harness_factory, monkeypatch) -> None:
    """No token of the call's own lease is verified, nor its prefix hashed
    a second time for the prefix check; what it holds equals what
    verifying the token would give."""
    h = await harness_factory(policy=EAGER)
    calls = _leases(h)
    p = prefix(3)
    await calls.generate(scope(), call_over(p), ONE, 10.0)  # created
    issued = await h.registry.acquire(scope(), PrefixView.of(p), None, None)
    assert issued.claims is not None and h.registry.signer.verify(issued.lease) == issued.claims
    assert await h.registry.release(issued.lease)
    verify, chain = h.registry.signer.verify, generation.call_chain
    used = {"verify": 0, "chain": 0}

    def counted(name: str, fn: Any) -> Any:
        def run(*args: Any) -> Any:
            used[name] += 1
            return fn(*args)
        return run

    monkeypatch.setattr(h.registry.signer, "verify", counted("verify", verify))
    monkeypatch.setattr(generation, "call_chain", counted("chain", chain))
    _, info = await calls.generate(scope(), call_over(p, "and then?"), ONE, 10.0)
    chunks = [item async for item in calls.stream(scope(), call_over(p, "streamed?"), ONE, 10.0)]
    assert info.state is CacheState.HIT and chunks[-1][1] is not None and chunks[-1][1].state is CacheState.HIT
    assert used == {"verify": 0, "chain": 0}
    (entry,) = await h.registry.entries()
    assert entry.leases == {}, "released by its claims"


async def test_a_bypass_is_the_acquires_record(harness_factory) -> None:
    h = await harness_factory()  # a prefix is cached on its second sighting
    reply, info = await _leases(h).generate(scope(), call_over(prefix(3)), ONE, 10.0)
    assert (info.state, info.bypass_reason) == (CacheState.BYPASS, BypassReason.FIRST_SIGHTING)
    assert info.prefix_fingerprint and reply.content is not None
    assert await h.registry.entries() == []


@pytest.mark.parametrize("stream", [False, True])
async def test_a_lease_invalidated_before_the_call_sends_it_uncached(harness_factory, stream: bool) -> None:
    h = await harness_factory(policy=EAGER)
    registry = h.registry
    acquire = registry.acquire

    async def acquire_then_invalidate(*args: Any) -> Any:
        result = await acquire(*args)
        await registry.invalidate(scope())
        return result

    registry.acquire = acquire_then_invalidate  # type: ignore[method-assign]
    calls = _leases(h)
    before = dict(h.provider.counts)
    if stream:
        chunks = [item async for item in calls.stream(scope(), call_over(prefix(3)), ONE, 10.0)]
        reply, info = chunks[-1]
        assert info is not None
    else:
        reply, info = await calls.generate(scope(), call_over(prefix(3)), ONE, 10.0)
    assert (info.state, info.bypass_reason) == (CacheState.BYPASS, BypassReason.INVALIDATED)
    assert info.expire_time is None and info.prefix_fingerprint
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == 0
    sent = {k: v - before.get(k, 0) for k, v in h.provider.counts.items() if v != before.get(k, 0)}
    assert sent.get("generate", 0) + sent.get("stream", 0) == 1, f"one uncached model call: {sent}"


async def test_the_rpc_in_one_round_trip_and_its_checks(cache_rpc) -> None:
    stub, app, _ = await cache_rpc()
    call = protos.generate(3)
    call.acquire.suffix_contents = 1
    call.acquire.holder = "h1"
    call.acquire.ttl.FromSeconds(600)
    first = await stub.GenerateContent(call)
    assert first.cache.state == cache_pb2.CACHE_STATE_CREATED and first.response.usage.cached_prompt_tokens > 0
    acquired = await stub.AcquireLease(protos.acquire(3, ttl_s=600))
    assert acquired.metadata.state == cache_pb2.CACHE_STATE_HIT, "the same prefix, hashed the same way"
    assert acquired.metadata.prefix_fingerprint == first.cache.prefix_fingerprint
    await stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=acquired.lease))
    streamed = [c async for c in stub.StreamGenerateContent(pb.StreamGenerateContentRequest(call=call))]
    assert streamed[-1].cache.state == cache_pb2.CACHE_STATE_HIT
    (entry,) = await app.registry.entries()
    assert entry.leases == {}

    for suffix, lease, field in ((0, "", "acquire.suffix_contents"), (8, "", "acquire.suffix_contents"),
                                 (1, "a-lease", "acquire")):
        bad = protos.generate(3, lease)
        bad.acquire.suffix_contents = suffix
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GenerateContent(bad)
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in error_from_rpc(err.value).field_violations]
    anonymous = protos.generate(3, app="")
    anonymous.acquire.suffix_contents = 1
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GenerateContent(anonymous)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, "a leased call names its app and user"


async def test_the_floor_is_judged_on_the_same_size_on_both_paths(cache_rpc) -> None:
    """A MARKED head under the minimum whose request clears it: GenerateContent
    with ``acquire`` writes it, and so does AcquireLease given the same
    ``request_tokens``; without them AcquireLease judges the prefix alone."""
    model = "local-sim-anthropic-1"
    head = PrefixView.of(convert.prefix_from_proto(protos.prefix(3), model)).tokens
    floor = head + 50
    stub, app, _ = await cache_rpc(min_prefix_tokens=floor, local_min_cache_tokens=floor)
    sizes: list[int] = []
    acquire = app.registry.acquire

    async def recording(*args: Any) -> Any:
        sizes.append(args[5] if len(args) > 5 else 0)
        return await acquire(*args)

    app.registry.acquire = recording  # type: ignore[method-assign]
    call = protos.generate(3, model=model, user="in-call", question="and now? " + "word " * 120)
    call.acquire.suffix_contents = 1
    in_call = await stub.GenerateContent(call)
    assert in_call.cache.state == cache_pb2.CACHE_STATE_CREATED
    (size,) = sizes
    assert size >= floor > head

    def lease(user: str, tokens: int | None) -> pb.AcquireLeaseRequest:
        request = protos.acquire(3, model=model, user=user)
        if tokens is not None:
            request.request_tokens = tokens
        return request

    sized = await stub.AcquireLease(lease("rpc", size))
    assert sized.metadata.state == cache_pb2.CACHE_STATE_CREATED, "the same size, the same decision"
    assert sized.metadata.prefix_fingerprint == in_call.cache.prefix_fingerprint
    await stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=sized.lease))
    for user, tokens in (("prefix-only", None), ("small", floor - 1)):
        plain = await stub.AcquireLease(lease(user, tokens))
        assert plain.metadata.state == cache_pb2.CACHE_STATE_BYPASS
        assert plain.metadata.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_BELOW_MIN_TOKENS
    small = protos.generate(3, model=model, user="small-call", question="and now?")
    small.acquire.suffix_contents = 1
    assert (await stub.GenerateContent(small)).cache.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_BELOW_MIN_TOKENS
    assert sizes[-1] < floor, "the in-call path judged the whole request too"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.AcquireLease(lease("negative", -1))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error_from_rpc(err.value).field_violations] == ["request_tokens"]
