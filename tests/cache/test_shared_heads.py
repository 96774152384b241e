"""Shared heads (``shared_head_apps``): the users of an opted-in app share
the caches of a head alone (model, system instruction, tools) on a
provider with named caches; conversation caches stay per user, a lease on
a shared head serves the app's users only, a user's conversation never
retires it, invalidating a user drops it, and its writes are booked on
the app-wide scope's loss account. Nothing is shared without the opt-in.
On the memory store, Redis and the Redis Cluster; then through the RPC
against the fake Gemini."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from agentctx.type.v1 import cache_pb2
from agentctx_common.errors import PermissionDenied
from cache_service.domain.call_lease import CallLease, CallLeases
from cache_service.domain.generation import Generator
from cache_service.domain.keys import Prefix, PrefixView, Scope
from cache_service.domain.model import CacheState
from cache_service.domain.policy import ADK, PolicySettings
from cache_service.domain.ports import CacheKind
from cache_service.providers.local import LocalProvider
from tests.cache import protos
from tests.cache.support import MODEL, TOOLS, call_over, prefix, scope, view
from tests.fakes.gemini_server import FakeGemini

pytestmark = pytest.mark.redis_cluster

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)
SHARED = frozenset({"app"})
ALICE, BOB = scope(user="alice"), scope(user="bob")


def app_wide(s: Scope) -> Scope:
    return Scope(s.provider, s.app, "", s.model, s.policy)


async def _lease(h: Any, v: PrefixView, s: Scope, holder: str = "") -> Any:
    result = await h.registry.acquire(s, v, None, None, holder)
    assert result.lease, result.info
    assert await h.registry.release(result.lease)
    return result


@pytest.mark.parametrize("opted_in", [True, False], ids=["opted-in", "not-opted-in"])
async def test_two_users_of_an_opted_in_app_share_one_head_create(harness_factory, opted_in: bool) -> None:
    h = await harness_factory(policy=EAGER, shared_head_apps=SHARED if opted_in else frozenset({"another"}))
    alice = await _lease(h, view(0), ALICE)
    bob = await _lease(h, view(0), BOB)
    assert alice.info.state is CacheState.CREATED
    if opted_in:
        assert bob.info.state is CacheState.HIT and bob.entry_id == alice.entry_id
        assert alice.info.scope_fingerprint == app_wide(ALICE).fingerprint
        assert h.provider.counts["create"] == 1
    else:
        assert bob.info.state is CacheState.CREATED and bob.entry_id != alice.entry_id
        assert h.provider.counts["create"] == 2
    # A user of an app that did not opt in shares nothing with it.
    other = await _lease(h, view(0), scope(app="other", user="bob"))
    assert other.info.state is CacheState.CREATED and other.entry_id not in (alice.entry_id, bob.entry_id)
    await h.assert_in_step()


async def test_a_conversation_reads_the_shared_head_and_grows_in_its_users_scope(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, shared_head_apps=SHARED)
    head = await _lease(h, view(0), ALICE)
    short = await _lease(h, view(1, words=1), BOB)
    assert short.info.state is CacheState.HIT and short.entry_id == head.entry_id
    grown = await _lease(h, view(2, words=200), BOB)
    assert grown.info.state is CacheState.GROWN and grown.entry_id != head.entry_id
    by_id = {e.id: e for e in await h.registry.entries()}
    assert by_id[grown.entry_id].scope_fp == BOB.fingerprint, "a conversation's cache stays its user's"
    assert not by_id[head.entry_id].retiring, "every user of the app reads the head"
    # Alice's conversation, the same contents as Bob's, never reads Bob's cache: the head is what they share.
    mine = await _lease(h, view(2, words=200), ALICE)
    assert mine.info.state is CacheState.HIT and mine.entry_id == head.entry_id
    assert by_id[head.entry_id].scope_fp == app_wide(ALICE).fingerprint
    await h.assert_in_step()


async def test_a_lease_on_a_shared_head_serves_the_apps_users_only(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, shared_head_apps=SHARED)
    generator = Generator(h.registry)
    lease = (await h.registry.acquire(ALICE, view(0), None, None)).lease
    reply, info = await generator.generate(BOB, call_over(prefix(0)), lease, 10.0)
    assert info.state is CacheState.CREATED and reply.usage is not None and reply.usage.cached_prompt_tokens > 0
    with pytest.raises(PermissionDenied):
        await generator.generate(scope(app="other", user="bob"), call_over(prefix(0)), lease, 10.0)
    assert await h.registry.release(lease)


async def test_a_users_conversation_never_retires_the_shared_head(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, shared_head_apps=SHARED)
    head = await _lease(h, view(0), ALICE)
    assert (await _lease(h, view(1, words=1), BOB, holder="bob-session")).entry_id == head.entry_id
    # Bob's conversation moves to another head: nothing of it reads this one again, but other users do.
    other_head = Prefix(MODEL, {"role": "", "parts": [{"text": "You are a terse assistant. " * 12}]}, TOOLS, None,
                        prefix(1, words=1).history)
    await _lease(h, PrefixView.of(other_head), BOB, holder="bob-session")
    assert head.entry_id in {e.id for e in await h.registry.entries() if not e.retiring}
    assert (await _lease(h, view(0), scope(user="carol"))).entry_id == head.entry_id


@pytest.mark.parametrize("opted_in", [True, False], ids=["opted-in", "not-opted-in"])
async def test_invalidating_a_user_drops_the_apps_shared_heads(harness_factory, opted_in: bool) -> None:
    h = await harness_factory(policy=EAGER, shared_head_apps=SHARED if opted_in else frozenset())
    head = await _lease(h, view(0), ALICE)
    await _lease(h, view(1, words=1), BOB)
    bobs = await _lease(h, view(2, words=200), BOB)
    assert bobs.info.state is (CacheState.GROWN if opted_in else CacheState.CREATED)
    removed, _ = await h.registry.invalidate(ALICE)
    left = {e.id for e in await h.registry.entries()}
    assert bobs.entry_id in left, "another user's conversation cache stays"
    if opted_in:
        assert removed == 1 and head.entry_id not in left, "the head may hold the user's templated instruction"
        assert (await _lease(h, view(0), BOB)).info.state is CacheState.CREATED
    else:
        assert removed == 1 and head.entry_id not in left  # Alice's own head
    await h.assert_in_step()


async def test_a_shared_heads_writes_are_booked_on_the_app_wide_account(harness_factory) -> None:
    h = await harness_factory(policy=EAGER, shared_head_apps=SHARED)
    calls = CallLeases(h.registry, Generator(h.registry), 4.0)
    _, info = await calls.generate(ALICE, call_over(prefix(0)), CallLease(suffix=1, holder="alice-session"), 10.0)
    assert info.state is CacheState.CREATED
    opening, keep = EAGER.loss_allowance_tokens, EAGER.loss_account_keep_s
    wall = h.clock.wall()
    shared = await h.registry.store.loss_balance(app_wide(ALICE).fingerprint, opening, keep, wall)
    assert shared < opening, "the head's write and storage are the app-wide scope's"
    assert await h.registry.store.loss_balance(ALICE.fingerprint, opening, keep, wall) == opening


@pytest.mark.parametrize("opted_in", [True, False], ids=["opted-in", "not-opted-in"])
async def test_gemini_users_share_a_head_through_the_rpc(cache_rpc, fake_gemini: FakeGemini, opted_in: bool) -> None:
    model = "gemini-2.5-flash"
    stub, _, _ = await cache_rpc(gemini_api_key=fake_gemini.api_key, gemini_base_url=fake_gemini.base_url,
                                 gemini_min_cache_tokens=64, shared_head_apps=["app"] if opted_in else [])
    states = []
    for user in ("alice", "bob"):
        lease = (await stub.AcquireLease(protos.acquire(0, model=model, user=user))).lease
        response = await stub.GenerateContent(protos.generate(0, lease, model=model, user=user,
                                                              question=f"hello from {user}"))
        assert response.response.usage.cached_prompt_tokens > 0
        states.append(response.cache.state)
        await stub.ReleaseLease(protos.pb.ReleaseLeaseRequest(lease=lease))
    if opted_in:
        assert states == [cache_pb2.CACHE_STATE_CREATED, cache_pb2.CACHE_STATE_HIT]
        assert len(fake_gemini.calls_of("create")) == 1
        # Another app's user reads nothing of it, and may not use its lease.
        lease = (await stub.AcquireLease(protos.acquire(0, model=model, user="bob"))).lease
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GenerateContent(protos.generate(0, lease, model=model, app="other", user="bob"))
        assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
    else:
        assert states == [cache_pb2.CACHE_STATE_CREATED, cache_pb2.CACHE_STATE_CREATED]
        assert len(fake_gemini.calls_of("create")) == 2


async def test_heads_are_shared_only_on_named_caches_under_the_agentctx_policy(harness_factory) -> None:
    """On Anthropic and OpenAI the provider shares a prefix across users by
    itself; the adk variant reproduces a client that shares nothing."""
    named = await harness_factory(policy=EAGER, shared_head_apps=SHARED)
    assert named.registry.shared_scope(ALICE) == app_wide(ALICE)
    assert named.registry.shared_scope(scope(app="other", user="alice")) is None
    marked = await harness_factory(policy=EAGER, shared_head_apps=SHARED,
                                   provider=LocalProvider(clock=named.clock, min_cache_tokens=64,
                                                          kind=CacheKind.MARKED))
    assert marked.registry.shared_scope(ALICE) is None
    adk = await harness_factory(policy=PolicySettings(min_prefix_tokens=64, variant=ADK), shared_head_apps=SHARED)
    assert adk.registry.shared_scope(ALICE) is None
