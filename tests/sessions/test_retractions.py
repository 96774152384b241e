"""Retractions (Event.retracts_event_id) through a real server on both
backends: the append checks the target, every listing keeps both events,
and BuildContext (whole history and bounded tail), compaction, memory and the
call/response pairing leave the retracted event out."""

from __future__ import annotations

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.memory.v1 import memory_service_pb2 as mpb
from agentctx.memory.v1 import memory_service_pb2_grpc
from agentctx.type.v1 import content_pb2, event_pb2
from context_service.domain.selection.pairing import NOT_ANSWERED
from tests.compaction.rpc_support import (
    Stub,
    append,
    build,
    call,
    check_request_shape,
    compact,
    create,
    events,
    result,
    summary_of,
    text,
)
from tests.sessions.helpers import fields, rpc_error

NAME = "apps/app1/users/u1/sessions/r1"


def retraction(target: str, event_id: str = "") -> event_pb2.Event:
    return event_pb2.Event(id=event_id or f"{target}.pop", author="user", retracts_event_id=target)


async def _retract(stub: Stub, target: str, name: str = NAME, **fields_: object) -> event_pb2.Event:
    reply = await stub.AppendEvent(pb.AppendEventRequest(parent=name, event=retraction(target, **fields_)))  # type: ignore[arg-type]
    return reply.event


def _texts(reply: pb.BuildContextResponse) -> list[str]:
    return [p.text for c in reply.request.contents for p in c.parts if p.text]


def _parts(reply: pb.BuildContextResponse) -> list[content_pb2.Part]:
    return [p for c in reply.request.contents for p in c.parts]


async def _conversation(stub: Stub, name: str = NAME) -> None:
    await create(stub, name=name)
    await append(stub, text("user", "weather in Lyon?"), name, id="u1")
    await append(stub, call("c1", "get_weather"), name, id="call1")
    await append(stub, result("c1", "get_weather", {"forecast": "sunny"}), name, id="out1")
    await append(stub, text("model", "It is sunny."), name, id="answer1")


async def test_a_retracted_event_leaves_builds_and_stays_listed(stub: Stub) -> None:
    await _conversation(stub)
    stored = await _retract(stub, "answer1")
    assert stored.retracts_event_id == "answer1" and stored.sequence == 5
    reply = await build(stub, NAME)
    assert "It is sunny." not in _texts(reply)
    assert _texts(reply) == ["weather in Lyon?", "what next?"]
    listed = await events(stub, NAME)
    assert [e.id for e in listed] == ["u1", "call1", "out1", "answer1", "answer1.pop"]
    assert listed[-1].retracts_event_id == "answer1" and not listed[-1].HasField("content")
    # A retry of the same retraction is the stored one, not a second retraction.
    again = await _retract(stub, "answer1")
    assert again.sequence == 5
    # A later answer is built as usual, the retracted one still out.
    await append(stub, text("model", "Sunny, 21 degrees."), NAME, id="answer2")
    assert _texts(await build(stub, NAME)) == ["weather in Lyon?", "Sunny, 21 degrees.", "what next?"]


async def test_the_target_is_checked(stub: Stub) -> None:
    await _conversation(stub)
    for target, why in (("nope", "names no event of the session"),):
        err = await rpc_error(_retract(stub, target))
        assert (err.code.value, err.reason) == ("FAILED_PRECONDITION", "RETRACTION_TARGET_INVALID")
        assert fields(err) == ["event.retracts_event_id"] and why in err.field_violations[0].description
    await _retract(stub, "out1")
    err = await rpc_error(_retract(stub, "out1", event_id="again"))
    assert err.reason == "RETRACTION_TARGET_INVALID" and "already retracted" in err.message
    err = await rpc_error(_retract(stub, "out1.pop"))
    assert err.reason == "RETRACTION_TARGET_INVALID" and "names a retraction" in err.message
    # An event of another session is no target.
    await create(stub, name=NAME + "b")
    err = await rpc_error(_retract(stub, "u1", name=NAME + "b"))
    assert err.reason == "RETRACTION_TARGET_INVALID"
    # A retraction carries nothing else and names another event.
    bad = retraction("u1", "x1")
    bad.content.CopyFrom(text("user", "hi"))
    bad.partial = True
    err = await rpc_error(stub.AppendEvent(pb.AppendEventRequest(parent=NAME, event=bad)))
    assert (err.code.value, err.reason) == ("INVALID_ARGUMENT", "INVALID_EVENT")
    assert fields(err) == ["event.content", "event.partial"]
    err = await rpc_error(stub.AppendEvent(pb.AppendEventRequest(parent=NAME, event=retraction("x2", "x2"))))
    assert fields(err) == ["event.retracts_event_id"]
    assert len(await events(stub, NAME)) == 5  # nothing refused was stored


async def test_a_batch_may_retract_what_it_appends(stub: Stub) -> None:
    await _conversation(stub)
    new = event_pb2.Event(id="late", author="user", content=text("user", "ignore this"))
    reply = await stub.BatchAppendEvents(pb.BatchAppendEventsRequest(parent=NAME, events=[
        new, retraction("late")]))
    assert [e.sequence for e in reply.events] == [5, 6]
    assert "ignore this" not in _texts(await build(stub, NAME))
    err = await rpc_error(stub.BatchAppendEvents(pb.BatchAppendEventsRequest(parent=NAME, events=[
        retraction("u1", "p1"), retraction("u1", "p2")])))
    assert err.reason == "RETRACTION_TARGET_INVALID"
    assert len(await events(stub, NAME)) == 6  # all or nothing


async def test_memory_takes_no_retracted_event(stub: Stub, channel: grpc.aio.Channel) -> None:
    await _conversation(stub)
    await _retract(stub, "answer1")
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    added = await memory.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=NAME))
    assert added.added_count == 1  # the user's question; the retracted answer is no memory
    found = await memory.SearchMemory(mpb.SearchMemoryRequest(parent="apps/app1/users/u1", query="sunny Lyon"))
    assert [m.memory.event_id for m in found.matches] == ["u1"]


async def test_retracting_a_call_or_its_response_leaves_no_half(stub: Stub) -> None:
    await _conversation(stub)
    await _retract(stub, "call1")
    reply = await build(stub, NAME)
    check_request_shape(list(reply.request.contents))
    assert not [p for p in _parts(reply) if p.HasField("function_call") or p.HasField("function_response")]

    other = NAME + "x"
    await _conversation(stub, other)
    await _retract(stub, "out1", other)
    reply = await build(stub, other)
    check_request_shape(list(reply.request.contents))
    responses = [p.function_response for p in _parts(reply) if p.HasField("function_response")]
    assert [r.id for r in responses] == ["c1"]
    assert NOT_ANSWERED in str(responses[0].response)  # answered by the builder, never by the retracted output


async def test_a_bounded_build_reads_the_tail_and_honours_retractions(stub: Stub) -> None:
    await create(stub, name=NAME)
    for i in range(30):
        await append(stub, text("user" if i % 2 == 0 else "model", f"message {i} " + "x" * 40), NAME, id=f"e{i}")
    await _retract(stub, "e28")
    policy = policy_pb2.SelectionPolicy(max_tokens=120, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE)
    texts = _texts(await build(stub, NAME, policy=policy))
    assert texts and not any(t.startswith("message 28 ") for t in texts)
    assert any(t.startswith("message 29 ") for t in texts)
    whole = _texts(await build(stub, NAME))
    assert not any(t.startswith("message 28 ") for t in whole) and len(whole) == 30


async def test_compaction_never_summarizes_a_retracted_event(stub: Stub) -> None:
    policy = policy_pb2.CompactionPolicy(enabled=True, keep_recent_tokens=20, retain_recent_exchanges=1)
    await create(stub, compaction=policy, name=NAME)
    for i in range(6):
        await append(stub, text("user", f"question {i} secretword{i}"), NAME, id=f"q{i}")
        await append(stub, text("model", f"answer {i}"), NAME, id=f"a{i}")
    await _retract(stub, "q1")  # inside the range the compaction summarizes
    done = await compact(stub, NAME)
    assert done.compacted
    summary = summary_of(await build(stub, NAME))
    assert "secretword0" in summary and "secretword1" not in summary
    # A retraction of an event already summarized is stored (the item is gone
    # from the client's view) but the summary keeps what it summarized.
    await _retract(stub, "q0")
    assert "secretword0" in summary_of(await build(stub, NAME))
    listed = await events(stub, NAME, include_compactions=False)
    assert [e.retracts_event_id for e in listed if e.retracts_event_id] == ["q1", "q0"]
