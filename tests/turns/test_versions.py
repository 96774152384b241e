"""Compatibility between versions: a cache service that lacks some methods
(an older or newer version) answers them UNIMPLEMENTED. One that does not
lease in the call (GenerateContent's ``acquire``) says nothing of the
cache: the turn goes ahead uncached (BYPASS UNSUPPORTED); without model
calls it is
FAILED_PRECONDITION CACHE_SERVICE_INCOMPATIBLE naming the method, with the
input stored; diagnostics say the scope's counts are unknown or fail
clearly. Never INTERNAL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2
from agentctx_common.errors import AgentCtxError
from agentctx_common.status import error_from_rpc
from tests.support.pair import ServicePair
from tests.turns.builders import MODEL, Agent, create_session, drain
from tests.turns.fake_cache import SCOPE_FINGERPRINT, RecordingCache, start_recording_cache

CALLS = ("GenerateContent", "StreamGenerateContent")
DIAGNOSTICS = ("GetScopeStatus", "InvalidateScope")


@pytest.fixture
async def cache_with(pair_factory: Callable[..., Any], certs_dir) -> AsyncIterator[Any]:
    """``await cache_with(methods)``: a context service whose cache service
    serves only ``methods``."""
    servers: list[grpc.aio.Server] = []

    async def start(methods: Collection[str]) -> tuple[ServicePair, RecordingCache]:
        pair = await pair_factory(with_cache=False)
        server, fake = await start_recording_cache(certs_dir, pair.cache_port, methods=methods)
        servers.append(server)
        return pair, fake

    yield start
    for server in servers:
        await server.stop(0)


async def _failure(call: Any, code: grpc.StatusCode) -> AgentCtxError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() is code, info.value
    return error_from_rpc(info.value)


async def test_without_leases_in_the_call_the_turn_goes_uncached(cache_with) -> None:
    pair, fake = await cache_with((*CALLS, *DIAGNOSTICS))
    agent = Agent(pair.stub, (await create_session(pair.stub)).name)
    done = await agent.turn("Hello.")
    assert done.reply.content.parts[0].text == "recorded"
    assert done.reply.cache_metadata.state == cache_pb2.CACHE_STATE_BYPASS
    assert done.reply.cache_metadata.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_UNSUPPORTED
    agent.stream = True
    streamed = await agent.turn("Again.")
    assert streamed.reply.cache_metadata.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_UNSUPPORTED
    assert [s.method for s in fake.seen] == ["GenerateContent", "StreamGenerateContent"]


async def test_one_call_leases_for_itself_and_its_record_is_stored(cache_with) -> None:
    pair, fake = await cache_with(CALLS)
    fake.leases_in_call = True
    agent = Agent(pair.stub, (await create_session(pair.stub)).name)
    done = await agent.turn("Hello.")
    assert done.reply.content.parts[0].text == "recorded"
    assert done.reply.cache_metadata.state == cache_pb2.CACHE_STATE_HIT
    assert [s.method for s in fake.seen] == ["GenerateContent"]
    (call,) = fake.calls
    assert call.acquire.suffix_contents == 1 and len(call.acquire.holder) == 32 and not call.lease
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=agent.session))).events
    assert [e.id for e in events] == ["agent-0", done.reply.id]


async def test_without_model_calls_a_turn_fails_clearly_and_keeps_its_input(cache_with) -> None:
    pair, fake = await cache_with(("AcquireLease", "ReleaseLease"))
    agent = Agent(pair.stub, (await create_session(pair.stub)).name)
    request = agent.request("Hello?")
    err = await _failure(pair.stub.Generate(request), grpc.StatusCode.FAILED_PRECONDITION)
    assert err.reason == "CACHE_SERVICE_INCOMPATIBLE" and err.metadata == {"method": "GenerateContent"}
    err = await _failure(
        drain(pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request))), grpc.StatusCode.FAILED_PRECONDITION
    )
    assert err.reason == "CACHE_SERVICE_INCOMPATIBLE" and err.metadata == {"method": "StreamGenerateContent"}
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=agent.session))).events
    assert [e.id for e in events] == ["agent-0"], "the input is stored for the retry"
    assert fake.seen == [], "no lease call of its own: the call that failed would have leased"


def _invalidation(session: str, scope_fingerprint: str) -> pb.InvalidateContextCacheRequest:
    _, app, _, user, _, sid = session.split("/")
    return pb.InvalidateContextCacheRequest(session=session, confirmation=pb.InvalidationConfirmation(
        app=app, user=user, session=sid, model=MODEL, scope_fingerprint=scope_fingerprint,
    ))


async def test_diagnostics_without_scope_methods(cache_with) -> None:
    pair, _ = await cache_with(("AcquireLease", "ReleaseLease", *CALLS))
    session = (await create_session(pair.stub)).name
    view = await pair.stub.GetContextLifecycle(pb.GetContextLifecycleRequest(session=session))
    assert not view.cache_service_reachable and view.cache_entry_count == 0
    err = await _failure(
        pair.stub.InvalidateContextCache(_invalidation(session, SCOPE_FINGERPRINT)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert err.reason == "CACHE_SERVICE_INCOMPATIBLE" and err.metadata == {"method": "GetScopeStatus"}

    pair, fake = await cache_with(("GetScopeStatus",))
    session = (await create_session(pair.stub)).name
    view = await pair.stub.GetContextLifecycle(pb.GetContextLifecycleRequest(session=session))
    assert view.cache_service_reachable and view.scope_fingerprint == SCOPE_FINGERPRINT
    err = await _failure(
        pair.stub.InvalidateContextCache(_invalidation(session, SCOPE_FINGERPRINT)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert err.reason == "CACHE_SERVICE_INCOMPATIBLE" and err.metadata == {"method": "InvalidateScope"}
    assert [s.method for s in fake.seen] == ["GetScopeStatus", "GetScopeStatus"]
