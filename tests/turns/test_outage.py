"""Degrade, never lose: with the cache service down or silent, Generate is
UNAVAILABLE with RetryInfo and the input stays stored; sessions and
BuildContext keep working; when the cache service is back, the retry
completes the turn exactly once and caching resumes on its own. Deadlines
and trace context reach the cache service with every call."""

from __future__ import annotations

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, content_pb2
from agentctx_common.errors import AgentCtxError
from agentctx_common.status import error_from_rpc
from tests.turns.builders import Agent, create_session, drain, until_available, user_text
from tests.turns.fake_cache import start_recording_cache

STATE = cache_pb2.CacheState


async def _unavailable(call) -> AgentCtxError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    return error_from_rpc(info.value)


async def test_cache_service_down_then_back_completes_the_turn_exactly_once(pair) -> None:
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    states = [(await agent.turn(f"Warm-up question {i}.")).reply.cache_metadata.state for i in range(3)]
    assert STATE.CACHE_STATE_CREATED in states

    await pair.stop_cache()
    request = agent.request("Asked while the cache service is down.")
    err = await _unavailable(agent.send(request))
    assert err.reason == "CACHE_SERVICE_UNAVAILABLE" and err.retry_after == pytest.approx(1.0)
    err = await _unavailable(drain(pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request))))
    assert err.reason == "CACHE_SERVICE_UNAVAILABLE"

    # Sessions and BuildContext do not need the cache service.
    other = await create_session(pair.stub, user="user-2")
    await pair.stub.AppendEvent(pb.AppendEventRequest(parent=other.name, event=user_text("x-1", "hello")))
    assert (await pair.stub.GetSession(pb.GetSessionRequest(name=other.name))).event_count == 1
    built = await pair.stub.BuildContext(pb.BuildContextRequest(
        session=session.name, input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="?")])],
    ))
    assert len(built.request.contents) == 2 * 3 + 1 + 1, "the failed turn's input is in the history"
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=session.name))).events
    assert events[-1].id == request.input[0].id

    await pair.start_cache()
    done = await until_available(agent.send, request)
    assert not done.deduplicated
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=session.name))).events
    ids = [e.id for e in events]
    assert ids.count(request.input[0].id) == 1 and ids.count(done.reply.id) == 1
    assert ids[-2:] == [request.input[0].id, done.reply.id]
    agent.turns += 1

    # Caching resumes without operator action.
    states = [(await agent.turn(f"After the restart {i}.")).reply.cache_metadata.state for i in range(3)]
    assert STATE.CACHE_STATE_CREATED in states or STATE.CACHE_STATE_HIT in states


async def test_deadlines_and_trace_context_reach_the_cache_service(span_exporter, pair_factory, certs_dir) -> None:
    # span_exporter: an SDK tracer provider is installed, as serve() installs one.
    pair = await pair_factory(with_cache=False, context={"cache_timeout_s": 30.0})
    server, fake = await start_recording_cache(certs_dir, pair.cache_port)
    try:
        agent = Agent(pair.stub, (await create_session(pair.stub)).name, timeout=5.0)
        await agent.turn("Hello.")
        assert [s.method for s in fake.seen] == ["GenerateContent"]
        for seen in fake.seen:
            # The wire carries deadlines with some rounding.
            assert seen.time_remaining is not None and 0 < seen.time_remaining <= 5.1
            assert "traceparent" in seen.metadata

        fake.seen.clear()
        agent.timeout = None  # the agent sets no deadline: cache_timeout_s bounds each call
        agent.stream = True
        await agent.turn("Again.")
        assert [s.method for s in fake.seen] == ["StreamGenerateContent"]
        assert [s.time_remaining is not None and 5.0 < s.time_remaining <= 30.1 for s in fake.seen] == [True], fake.seen
    finally:
        await server.stop(0)


async def test_a_cache_service_silent_past_its_deadline_is_unavailable(pair_factory, certs_dir) -> None:
    pair = await pair_factory(with_cache=False, context={"cache_timeout_s": 0.5})
    server, fake = await start_recording_cache(certs_dir, pair.cache_port)
    try:
        agent = Agent(pair.stub, (await create_session(pair.stub)).name, timeout=20.0)
        fake.hang = True
        err = await _unavailable(agent.turn("Hello?"))
        assert err.reason == "CACHE_SERVICE_UNAVAILABLE" and err.metadata["cause"] == "DEADLINE_EXCEEDED"
        fake.hang = False
        response = await agent.send(agent.request("Hello?"))
        assert response.reply.content.parts[0].text == "recorded"
    finally:
        await server.stop(0)
