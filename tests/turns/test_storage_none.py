"""Generate with TURN_STORAGE_NONE, the way ADK's Runner drives it: the
runner appends the user message, the reply and the tool results itself,
and each model call stores nothing."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, event_pb2
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from tests.turns.builders import SYSTEM, TOOLS, calls_of, create_session, text_of, tool_result, user_text

STATE = cache_pb2.CacheState


async def _events(stub: Any, session: str) -> list[event_pb2.Event]:
    return list((await stub.ListEvents(pb.ListEventsRequest(parent=session, page_size=1000))).events)


class Runner:
    """What ADK's Runner does with a session service and a model that
    calls Generate with storage NONE: it stores every event itself."""

    def __init__(self, stub: Any, session: str) -> None:
        self.stub, self.session, self.n = stub, session, 0

    async def append(self, event: event_pb2.Event) -> None:
        await self.stub.AppendEvent(pb.AppendEventRequest(parent=self.session, event=event))

    async def call(self, **extra: Any) -> pb.GenerateResponse:
        return await self.stub.Generate(pb.GenerateRequest(
            session=self.session, system_instruction=SYSTEM, tools=TOOLS, storage=pb.TURN_STORAGE_NONE, **extra
        ), timeout=20)

    async def store_reply(self, reply: event_pb2.Event) -> None:
        self.n += 1
        stored = event_pb2.Event(id=f"runner-reply-{self.n}", author=reply.author, content=reply.content)
        await self.append(stored)

    async def user_turn(self, text: str) -> list[pb.GenerateResponse]:
        """A user message and every model call it leads to (tools answered)."""
        self.n += 1
        await self.append(user_text(f"runner-user-{self.n}", text))
        out = []
        while True:
            response = await self.call()
            out.append(response)
            await self.store_reply(response.reply)
            calls = calls_of(response.reply)
            if not calls:
                return out
            self.n += 1
            await self.append(tool_result(f"runner-tool-{self.n}", calls, {"forecast": "sunny"}))


async def test_a_runner_driven_conversation_is_cached_and_nothing_is_stored_twice(pair) -> None:
    session = await create_session(pair.stub)
    runner = Runner(pair.stub, session.name)
    responses = await runner.user_turn("Hello, I am planning a trip.")
    responses += await runner.user_turn("Please call get_weather for Paris.")
    assert len(responses) == 3, "the tool call and the answer after its result"
    assert "get_weather" in text_of(responses[-1].reply.content)
    for i in range(4):
        responses += await runner.user_turn(f"And what else, {i}?")

    for r in responses:
        assert r.reply.id and not r.reply.name and r.reply.sequence == 0, "the reply comes back unstored"
        assert not r.deduplicated
        assert r.reply.usage.prompt_tokens > 0
        assert r.accounting.events_selected > 0
    events = await _events(pair.stub, session.name)
    assert [e.id for e in events if e.id.startswith("reply-")] == [], "no reply the service appended itself"
    assert len(events) == runner.n, "exactly the runner's events, each once"
    states = [r.reply.cache_metadata.state for r in responses]
    assert STATE.CACHE_STATE_CREATED in states
    assert STATE.CACHE_STATE_HIT in states or STATE.CACHE_STATE_GROWN in states
    served = [r for r in responses if r.reply.cache_metadata.state in (STATE.CACHE_STATE_HIT, STATE.CACHE_STATE_GROWN)]
    assert all(r.reply.usage.cached_prompt_tokens > 0 for r in served)


async def test_the_stored_user_message_is_not_part_of_the_leased_prefix(pair) -> None:
    """The runner stored the user message before the call: it is the
    current input, so the leased prefix ends with the last model content.
    Two sessions with the same history and different newest messages
    therefore lease the same prefix (one cache scope: app, user, model)."""
    last = []
    for message in ("A question that never repeats: alpha.", "Another one entirely: beta."):
        session = await create_session(pair.stub)
        runner = Runner(pair.stub, session.name)
        for i in range(3):
            await runner.user_turn(f"Tell me about city number {i}, at some length please.")
        last.append((await runner.user_turn(message))[-1].reply.cache_metadata)
    assert last[0].prefix_fingerprint and last[0].prefix_tokens > 0
    assert last[1].prefix_fingerprint == last[0].prefix_fingerprint
    assert last[1].state in (STATE.CACHE_STATE_HIT, STATE.CACHE_STATE_GROWN)


async def test_request_input_is_sent_but_not_stored(pair) -> None:
    session = await create_session(pair.stub)
    runner = Runner(pair.stub, session.name)
    await runner.user_turn("Hello there.")
    before = await _events(pair.stub, session.name)
    response = await runner.call(input=[user_text("transient-1", "Please call get_weather for Rome.")])
    assert [c.name for c in calls_of(response.reply)] == ["get_weather"], "the input reached the model"
    assert response.accounting.input.tokens > 0
    assert [e.id for e in await _events(pair.stub, session.name)] == [e.id for e in before]
    # A second call with the same ids calls the model again: nothing was stored to find.
    again = await runner.call(input=[user_text("transient-1", "Please call get_weather for Rome.")])
    assert not again.deduplicated and again.reply.id != response.reply.id


async def test_client_ids_are_kept_and_nothing_is_looked_up_by_them(pair) -> None:
    session = await create_session(pair.stub)
    runner = Runner(pair.stub, session.name)
    await runner.append(user_text("u1", "Hello."))
    response = await runner.call(reply_event_id="my-reply", invocation_id="inv-adk-1", agent="planner")
    assert (response.reply.id, response.reply.invocation_id, response.reply.author) == ("my-reply", "inv-adk-1", "planner")
    assert [e.id for e in await _events(pair.stub, session.name)] == ["u1"]


async def test_stream_generate_stores_nothing_either(pair) -> None:
    session = await create_session(pair.stub)
    runner = Runner(pair.stub, session.name)
    await runner.append(user_text("u1", "Hello, stream please."))
    request = pb.StreamGenerateRequest(turn=pb.GenerateRequest(
        session=session.name, system_instruction=SYSTEM, storage=pb.TURN_STORAGE_NONE
    ))
    items = [item async for item in pair.stub.StreamGenerate(request, timeout=20)]
    assert items[-1].HasField("result") and text_of(items[-1].result.reply.content)
    assert [e.id for e in await _events(pair.stub, session.name)] == ["u1"]


async def test_storing_turn_still_needs_an_input(pair) -> None:
    session = await create_session(pair.stub)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await pair.stub.Generate(pb.GenerateRequest(session=session.name), timeout=20)
    err = error_from_rpc(caught.value)
    assert err.reason == Reason.INVALID_GENERATE_REQUEST
    assert [v.field for v in err.field_violations] == ["input"]
