"""The client's diagnostics calls (get_context_lifecycle,
invalidate_context_cache) and the cache metadata of replies, against the
real service pair in this process; their retry rules against a scripted
server."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import AsyncIterator

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx_client import (
    CacheBypassReason,
    CacheInvalidation,
    CacheState,
    CompactionTrigger,
    ContextClient,
    ContextLifecycle,
    ErrorReason,
    FailedPreconditionError,
    InvalidationConfirmation,
    NotFoundError,
    RetryPolicy,
    TlsConfig,
    UnavailableError,
    connect,
)
from tests.client.servers import Failure, ScriptedDiagnostics, start
from tests.support.pair import ServicePair, start_pair

MODEL = "local-sim-1"
# Long enough for the simulator to cache it (1,024 tokens at least).
SYSTEM = "You are a meticulous assistant who checks every figure twice before answering. " * 80


@pytest.fixture
async def pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    p = await start_pair(certs_dir, tmp_path)
    yield p
    await p.close()


@pytest.fixture
async def client(pair: ServicePair) -> AsyncIterator[ContextClient]:
    tls = TlsConfig(ca=pair.certs / "ca.pem", cert=pair.certs / "agent-client.pem",
                    key=pair.certs / "agent-client.key", server_name="localhost")
    async with connect(f"127.0.0.1:{pair.context_port}", tls=tls, timeout=30) as c:
        yield c


async def _cached_session(client: ContextClient, session_id: str) -> tuple[str, list[CacheState]]:
    """A session whose scope holds a live cache: three turns on one long
    system instruction (first sighting, create, hit)."""
    config = policy_pb2.ContextConfig()
    config.cache.enabled = True
    session = await client.create_session("diag", "u1", session_id=session_id, model=MODEL, config=config)
    states = []
    for i in range(3):
        turn = await client.generate(session.name, f"question {i}", system_instruction=SYSTEM)
        assert turn.cache_metadata is not None
        states.append(turn.cache_metadata.state)
    return session.name, states


async def test_replies_carry_typed_cache_metadata(client: ContextClient) -> None:
    name, states = await _cached_session(client, "meta")
    assert states == [CacheState.CACHE_STATE_BYPASS, CacheState.CACHE_STATE_CREATED, CacheState.CACHE_STATE_HIT]
    events = [e async for e in client.iter_events(name)]
    replies = [e for e in events if e.author != "user"]
    first, last = replies[0].cache_metadata, replies[-1].cache_metadata
    assert first is not None and last is not None
    assert first.bypass_reason == CacheBypassReason.CACHE_BYPASS_REASON_FIRST_SIGHTING
    assert last.prefix_tokens >= 1024 and len(last.scope_fingerprint) == 64 and last.uses == 2
    assert last.expire_time is not None
    proto = replies[-1].proto
    assert proto is not None and last.proto == proto.cache_metadata
    assert all(e.cache_metadata is None for e in events if e.author == "user")


async def test_lifecycle_is_typed_and_matches_the_message(client: ContextClient) -> None:
    name, _ = await _cached_session(client, "life")
    compacted = await client.compact_session(name, policy=policy_pb2.CompactionPolicy(keep_recent_tokens=50))
    assert compacted.compaction is not None
    assert compacted.compaction.compaction_trigger == CompactionTrigger.COMPACTION_TRIGGER_MANUAL

    view = await client.get_context_lifecycle(name)
    raw = await client.stub.GetContextLifecycle(pb.GetContextLifecycleRequest(session=name), timeout=10)
    assert view == ContextLifecycle.from_proto(raw) and view.proto == raw
    assert (view.session, view.model, view.event_count, view.compaction_count) == (name, MODEL, 7, 1)
    assert view.latest_trigger == CompactionTrigger.COMPACTION_TRIGGER_MANUAL
    assert view.latest_compaction_event_id == compacted.compaction.id
    assert view.cache_service_reachable and view.cache_entry_count == 1 and len(view.scope_fingerprint) == 64
    assert view.latest_cache is not None and view.latest_cache.state == CacheState.CACHE_STATE_HIT
    assert view.confirmation() == InvalidationConfirmation("diag", "u1", "life", MODEL, view.scope_fingerprint)


async def test_invalidation_needs_the_exact_confirmation(client: ContextClient) -> None:
    name, _ = await _cached_session(client, "inval")
    view = await client.get_context_lifecycle(name, model=MODEL)
    wrong = dataclasses.replace(view.confirmation(), scope_fingerprint="0" * 64)
    with pytest.raises(FailedPreconditionError) as caught:
        await client.invalidate_context_cache(name, confirmation=wrong)
    assert caught.value.reason == ErrorReason.INVALIDATION_CONFIRMATION_MISMATCH
    assert "scope_fingerprint" in caught.value.metadata.get("fields", "")
    assert (await client.get_context_lifecycle(name)).cache_entry_count == 1  # nothing changed

    done = await client.invalidate_context_cache(name, model=MODEL, confirmation=view.confirmation())
    assert done == CacheInvalidation(1, 0, view.scope_fingerprint, proto=done.proto)
    assert (await client.get_context_lifecycle(name)).cache_entry_count == 0


async def test_lifecycle_of_a_missing_session_is_not_found(client: ContextClient) -> None:
    with pytest.raises(NotFoundError) as caught:
        await client.get_context_lifecycle("apps/diag/users/u1/sessions/missing")
    assert caught.value.reason == ErrorReason.SESSION_NOT_FOUND


def test_a_confirmation_needs_a_session_name() -> None:
    view = ContextLifecycle.from_proto(pb.ContextLifecycle(session="not/a/name", model=MODEL))
    with pytest.raises(ValueError, match="not a session name"):
        view.confirmation()


FAST = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)


def _unavailable() -> Failure:
    return Failure(grpc.StatusCode.UNAVAILABLE, reason="CACHE_SERVICE_UNAVAILABLE", retry_delay=0.01)


async def test_the_lifecycle_read_is_retried_and_the_invalidation_is_not() -> None:
    service = ScriptedDiagnostics()
    server, target = await start(service)
    try:
        async with connect(target, insecure_loopback=True, retry=FAST) as c:
            service.fail("GetContextLifecycle", _unavailable())
            view = await c.get_context_lifecycle("apps/a/users/u/sessions/s", model="m2")
            assert len(service.requests["GetContextLifecycle"]) == 2
            assert (view.model, view.cache_entry_count, view.latest_cache) == ("m2", 2, None)

            service.fail("InvalidateContextCache", _unavailable())
            confirm = view.confirmation()
            with pytest.raises(UnavailableError):
                await c.invalidate_context_cache(view.session, model="m2", confirmation=confirm)
            done = await c.invalidate_context_cache(view.session, model="m2", confirmation=confirm)
            sent = service.requests["InvalidateContextCache"]
            assert len(sent) == 2 and done.entries_removed == 2 and done.scope_fingerprint == "f" * 64
            assert InvalidationConfirmation.from_proto(sent[-1].confirmation) == confirm
            assert (sent[-1].session, sent[-1].model) == (view.session, "m2")
    finally:
        await server.stop(None)
