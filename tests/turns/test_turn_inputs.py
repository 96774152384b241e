"""A turn's input events are stored all or nothing, in one transaction,
and their number is bounded (``max_turn_inputs``): a turn that fails while
storing its input leaves none of it, and a retry stores it exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.errors import AlreadyExists, NotFound
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from context_service.domain.config import ContextConfig
from context_service.domain.model import SessionKey
from context_service.storage.sql_store import SqlSessionStore, open_store
from tests.sessions.helpers import migrate, text_event
from tests.turns.builders import SYSTEM, Agent, create_session, drain, user_text

KEY = SessionKey("app", "user-1", "s1")


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlSessionStore]:
    await migrate(db_url)
    opened = await open_store(db_url)
    await opened.create_session(KEY, state={}, config=ContextConfig())
    yield opened
    await opened.close()


# --- the store: append_events --------------------------------------------------------


async def test_append_events_stores_all_with_consecutive_sequences_and_a_retry_is_deduplicated(store) -> None:
    await store.append_event(KEY, text_event("before"))
    batch = [text_event(f"in-{i}", f"message {i}") for i in range(5)]
    stored = await store.append_events(KEY, batch)
    assert [r.event.sequence for r in stored] == [2, 3, 4, 5, 6]
    assert not any(r.deduplicated for r in stored)

    again = await store.append_events(KEY, batch)
    assert all(r.deduplicated for r in again)
    assert [r.event.sequence for r in again] == [2, 3, 4, 5, 6]
    session = await store.get_session(KEY)
    assert session.event_count == 6 and session.last_sequence == 6
    assert again[-1].session_etag == stored[-1].session_etag == session.etag, "a deduplicated retry changes nothing"

    # Part stored already (the same content), part new: only the new ones get sequences.
    mixed = await store.append_events(KEY, [batch[4], text_event("in-5", "message 5")])
    assert [(r.event.id, r.event.sequence, r.deduplicated) for r in mixed] == [("in-4", 6, True), ("in-5", 7, False)]


async def test_append_events_is_all_or_nothing(store) -> None:
    await store.append_event(KEY, text_event("taken", "the original"))
    batch = [text_event("new-0"), text_event("taken", "other content"), text_event("new-1")]
    with pytest.raises(AlreadyExists) as info:
        await store.append_events(KEY, batch)
    assert info.value.reason is Reason.EVENT_ID_CONFLICT
    assert [e.id for e in await store.list_events(KEY)] == ["taken"]
    session = await store.get_session(KEY)
    assert session.event_count == 1 and session.last_sequence == 1

    with pytest.raises(NotFound):
        await store.append_events(SessionKey("app", "user-1", "missing"), [text_event("x")])

    # Without the conflicting one, the same batch stores everything, gapless.
    done = await store.append_events(KEY, [batch[0], batch[2]])
    assert [(r.event.id, r.event.sequence) for r in done] == [("new-0", 2), ("new-1", 3)]
    # Group commit's appends and these share the sequence.
    assert (await store.append_event(KEY, text_event("after"))).event.sequence == 4


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
