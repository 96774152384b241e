"""Generate over real servers: a tool-using conversation through the cache
service, exactly-once retries, validation, and cache failures that become
bypasses."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import cache_pb2, content_pb2, generation_pb2
from agentctx_common.certs import SAMPLE_AGENT_ID
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from cache_service.providers.base import RateLimited
from tests.turns.builders import (
    SYSTEM,
    TOOLS,
    Agent,
    calls_of,
    create_session,
    pairing_violations,
    text_of,
    user_text,
)

STATE = cache_pb2.CacheState
BYPASS = cache_pb2.CacheBypassReason


async def _events(stub, session: str) -> list:
    return list((await stub.ListEvents(pb.ListEventsRequest(parent=session, page_size=1000))).events)


async def test_tool_using_conversation_is_cached_and_stored_in_order(pair) -> None:
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    replies = [await agent.turn("Hello, I am planning a trip.")]
    replies.append(await agent.turn("Please call get_weather for Paris."))
    call = calls_of(replies[-1].reply)
    assert [c.name for c in call] == ["get_weather"] and call[0].id
    assert not replies[-1].reply.turn_complete, "a reply calling tools leaves the agent's turn open"
    replies.append(await agent.turn())  # the tool result
    assert "get_weather" in text_of(replies[-1].reply.content)
    assert replies[-1].reply.turn_complete
    for i in range(4):
        replies.append(await agent.turn(f"And what else, {i}?"))

    states = [r.reply.cache_metadata.state for r in replies]
    assert states[0] == STATE.CACHE_STATE_BYPASS
    assert replies[0].reply.cache_metadata.bypass_reason in (
        BYPASS.CACHE_BYPASS_REASON_FIRST_SIGHTING, BYPASS.CACHE_BYPASS_REASON_EMPTY_PREFIX,
        BYPASS.CACHE_BYPASS_REASON_BELOW_MIN_TOKENS,
    )
    assert STATE.CACHE_STATE_CREATED in states
    assert STATE.CACHE_STATE_HIT in states or STATE.CACHE_STATE_GROWN in states
    served = [r for r in replies if r.reply.cache_metadata.state in (STATE.CACHE_STATE_HIT, STATE.CACHE_STATE_GROWN)]
    assert all(r.reply.usage.cached_prompt_tokens > 0 for r in served)
    assert all(r.reply.usage.prompt_tokens > r.reply.usage.cached_prompt_tokens for r in replies)
    assert all(r.accounting.prefix_fingerprint and r.accounting.events_selected >= 0 for r in replies)

    events = await _events(pair.stub, session.name)
    assert [e.id for e in events] == [x for i, r in enumerate(replies) for x in (f"agent-{i}", r.reply.id)]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    stored_reply = events[3]
    assert stored_reply == replies[1].reply
    assert stored_reply.cache_metadata == replies[1].reply.cache_metadata
    assert stored_reply.usage.prompt_tokens > 0
    assert stored_reply.finish_reason == generation_pb2.FINISH_REASON_STOP and stored_reply.model_version
    assert not stored_reply.HasField("custom_metadata")

    built = await pair.stub.BuildContext(pb.BuildContextRequest(
        session=session.name, input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="more")])],
        system_instruction=SYSTEM, tools=TOOLS,
    ))
    assert pairing_violations(built.request.contents) == []
    assert len(built.request.contents) == len(events) + 1


async def test_retry_with_the_same_ids_completes_the_turn_once(pair) -> None:
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    await agent.turn("Hello.")
    request = agent.request("Please call lookup for the capital of France.")
    first = await agent.send(request)
    calls = pair.provider.counts["generate"]
    again = await agent.send(request)
    assert again.deduplicated and not first.deduplicated
    assert again.reply == first.reply
    assert pair.provider.counts["generate"] == calls, "a stored reply is never generated again"
    assert len(await _events(pair.stub, session.name)) == 4


async def test_changed_input_under_a_stored_id_is_refused(pair) -> None:
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    request = agent.request("first wording")
    await pair.stub.AppendEvent(pb.AppendEventRequest(parent=session.name, event=request.input[0]))
    request.input[0].content.parts[0].text = "second wording"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await agent.send(request)
    assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
    assert error_from_rpc(info.value).reason == "EVENT_ID_CONFLICT"
    assert len(await _events(pair.stub, session.name)) == 1


async def test_client_named_reply_invocation_and_author(pair) -> None:
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    response = await agent.turn("Hi", reply_event_id="my-reply", invocation_id="inv-7", agent="planner")
    reply = response.reply
    assert (reply.id, reply.invocation_id, reply.author) == ("my-reply", "inv-7", "planner")
    assert reply.name == f"{session.name}/events/my-reply"
    # A reply id naming a stored event that is not a reply is refused.
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await agent.turn("Again", reply_event_id="agent-0")
    assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
    assert error_from_rpc(info.value).reason == "REPLY_ID_CONFLICT"


@pytest.mark.parametrize("stream", [False, True])
async def test_invalid_turns_name_the_field(pair, stream: bool) -> None:
    session = await create_session(pair.stub)
    prefix = "turn." if stream else ""
    bad = [
        (pb.GenerateRequest(session=session.name), f"{prefix}input"),
        (pb.GenerateRequest(session=session.name, input=[user_text("a", "x"), user_text("a", "y")]), f"{prefix}input[1].id"),
        (pb.GenerateRequest(session=session.name, input=[user_text("a", "x")], reply_event_id="no spaces"),
         f"{prefix}reply_event_id"),
        (pb.GenerateRequest(session=session.name, input=[user_text("a", "x")], agent="bad\nname"), f"{prefix}agent"),
        (pb.GenerateRequest(session="sessions/x", input=[user_text("a", "x")]), f"{prefix}session"),
    ]
    partial = user_text("p", "x")
    partial.partial = True
    bad.append((pb.GenerateRequest(session=session.name, input=[partial]), f"{prefix}input[0].partial"))
    for request, field in bad:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            if stream:
                async for _ in pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request)):
                    pass
            else:
                await pair.stub.Generate(request)
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT, field
        assert field in [v.field for v in error_from_rpc(info.value).field_violations], field
    assert await _events(pair.stub, session.name) == []


@pytest.mark.parametrize("stream", [False, True])
async def test_an_invalid_selection_policy_is_refused_before_the_input_is_stored(pair, stream: bool) -> None:
    session = await create_session(pair.stub)
    request = pb.GenerateRequest(
        session=session.name, input=[user_text("a", "x")], policy=policy_pb2.SelectionPolicy(max_bytes=-1)
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        if stream:
            async for _ in pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request)):
                pass
        else:
            await pair.stub.Generate(request)
    err = error_from_rpc(info.value)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert err.reason == Reason.INVALID_SELECTION_POLICY
    assert [v.field for v in err.field_violations] == ["policy.max_bytes"]
    assert await _events(pair.stub, session.name) == []


async def test_caching_off_is_a_disabled_bypass_without_cache_calls(pair) -> None:
    session = await create_session(pair.stub, cache=False)
    agent = Agent(pair.stub, session.name)
    for i in range(3):
        response = await agent.turn(f"turn {i}")
        assert response.reply.cache_metadata.state == STATE.CACHE_STATE_BYPASS
        assert response.reply.cache_metadata.bypass_reason == BYPASS.CACHE_BYPASS_REASON_DISABLED
        assert response.reply.cache_metadata.scope_fingerprint
    assert pair.provider.counts["create"] == 0


async def test_cache_failures_inside_the_cache_service_are_bypasses(pair_factory) -> None:
    # Never grow: the turn after the provider loses the cache must hit it.
    pair = await pair_factory(cache={"grow_share": 1000.0})
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    await agent.turn("Hello.")  # first sighting
    pair.provider.fail_next("create", RateLimited(status=429, retry_after=5.0))
    limited = await agent.turn("Next.")
    assert limited.reply.cache_metadata.state == STATE.CACHE_STATE_BYPASS
    assert limited.reply.cache_metadata.bypass_reason == BYPASS.CACHE_BYPASS_REASON_RATE_LIMITED
    assert limited.reply.usage.prompt_tokens > 0

    states = [(await agent.turn(f"more {i}")).reply.cache_metadata.state for i in range(3)]
    assert STATE.CACHE_STATE_CREATED in states, "caching starts once the provider allows it"

    pair.provider.lose_caches()
    missing = await agent.turn("After the provider lost the cache.")
    assert missing.reply.cache_metadata.state == STATE.CACHE_STATE_BYPASS
    assert missing.reply.cache_metadata.bypass_reason == BYPASS.CACHE_BYPASS_REASON_CACHE_MISSING
    again = await agent.turn("And again.")
    assert again.reply.cache_metadata.state in (STATE.CACHE_STATE_CREATED, STATE.CACHE_STATE_HIT)


async def test_other_apps_are_denied_before_anything_is_read(pair_factory) -> None:
    pair = await pair_factory(
        context={"app_grants": {SAMPLE_AGENT_ID: ["app"]}, "dev_anonymous_apps": [], "require_client_cert": True}
    )
    request = pb.GenerateRequest(session="apps/other/users/u/sessions/s", input=[user_text("a", "x")])
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await pair.stub.Generate(request)
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
    missing = pb.GenerateRequest(session="apps/app/users/u/sessions/none", input=[user_text("a", "x")])
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await pair.stub.Generate(missing)
    assert info.value.code() is grpc.StatusCode.NOT_FOUND


async def test_a_reply_that_is_never_stored_deletes_no_cache(pair) -> None:
    """ADK Go #1951's review: a reply that never reached the session must
    not decide cache deletions. Here the session is deleted while the model
    answers: the turn fails, and the cache it created stays usable."""
    a = Agent(pair.stub, (await create_session(pair.stub)).name)
    await a.turn("Hello.")
    pair.provider.latency_s = 0.3
    before = pair.provider.counts["generate"]
    turn = asyncio.create_task(a.turn("Second question."))
    while pair.provider.counts["generate"] == before:  # noqa: ASYNC110 - polls a fake's counter
        await asyncio.sleep(0.01)
    await pair.stub.DeleteSession(pb.DeleteSessionRequest(name=a.session))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await turn
    assert info.value.code() is grpc.StatusCode.NOT_FOUND
    pair.provider.latency_s = 0.0
    assert len(pair.provider.live_names()) == 1

    # The same conversation in another session of the scope hits that cache.
    b = Agent(pair.stub, (await create_session(pair.stub)).name, name="b")
    await b.turn("Hello.")
    creates = pair.provider.counts["create"]
    second = await b.turn("Second question.")
    assert second.reply.cache_metadata.state == STATE.CACHE_STATE_HIT
    assert pair.provider.counts["create"] == creates
