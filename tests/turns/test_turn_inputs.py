"""A turn's input events are stored all or nothing, in one transaction,
and their number is bounded (``max_turn_inputs``): a turn that fails while
storing its input leaves none of it, and a retry stores it exactly once.
The store's side (append_events) is in the store contract,
tests/storage/conformance/test_appends.py."""

from __future__ import annotations

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.status import error_from_rpc
from tests.turns.builders import SYSTEM, Agent, create_session, drain, user_text

# --- Generate ----------------------------------------------------------------------------


async def test_a_turn_whose_input_cannot_be_stored_stores_none_of_it(pair) -> None:
    session = await create_session(pair.stub)
    await pair.stub.AppendEvent(pb.AppendEventRequest(parent=session.name, event=user_text("taken", "the original")))
    request = pb.GenerateRequest(
        session=session.name, system_instruction=SYSTEM,
        input=[user_text("fresh-0", "first"), user_text("taken", "not the original"), user_text("fresh-1", "last")],
    )
    for call in (pair.stub.Generate(request), drain(pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request)))):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call
        assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_from_rpc(info.value).reason == "EVENT_ID_CONFLICT"
        events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=session.name))).events
        assert [e.id for e in events] == ["taken"], "none of the turn's input is stored"

    # The agent fixes its ids and retries: every input once, then the reply.
    del request.input[1]
    first = await pair.stub.Generate(request)
    again = await pair.stub.Generate(request)
    assert again.deduplicated and again.reply.id == first.reply.id
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=session.name))).events
    assert [e.id for e in events] == ["taken", "fresh-0", "fresh-1", first.reply.id]
    assert [e.sequence for e in events] == [1, 2, 3, 4]


async def test_the_number_of_inputs_is_bounded(pair_factory) -> None:
    pair = await pair_factory(context={"max_turn_inputs": 3})
    session = await create_session(pair.stub)
    agent = Agent(pair.stub, session.name)
    too_many = agent.request()
    too_many.input.extend(user_text(f"more-{i}", f"more {i}") for i in range(3))
    for call, field in (
        (pair.stub.Generate(too_many), "input"),
        (drain(pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=too_many))), "turn.input"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        err = error_from_rpc(info.value)
        assert err.reason == "INVALID_GENERATE_REQUEST"
        assert [v.field for v in err.field_violations] == [field]
        assert "at most 3" in err.field_violations[0].description
    assert (await pair.stub.GetSession(pb.GetSessionRequest(name=session.name))).event_count == 0

    del too_many.input[3]
    done = await pair.stub.Generate(too_many)
    assert (await pair.stub.GetSession(pb.GetSessionRequest(name=session.name))).event_count == 4
    assert done.reply.id


async def test_the_default_bound(pair) -> None:
    session = await create_session(pair.stub)
    request = pb.GenerateRequest(session=session.name, input=[user_text(f"m-{i}", "x") for i in range(257)])
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await pair.stub.Generate(request)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error_from_rpc(info.value).field_violations] == ["input"]
    assert (await pair.stub.GetSession(pb.GetSessionRequest(name=session.name))).event_count == 0
