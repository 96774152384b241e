"""Session and event RPCs through a real server and mTLS-capable channel, on
both backends: round trips, etags, idempotent retries, paging across
inserts, validation errors with their field paths, and unknown fields."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import field_mask_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import event_pb2
from tests.sessions.helpers import append_request, fields, pb_text_event, rpc_error

PARENT = "apps/shop/users/alice"


async def _create(stub, session_id: str = "s1", **kwargs) -> session_pb2.Session:  # type: ignore[no-untyped-def]
    return await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id=session_id, **kwargs))


async def test_session_lifecycle(stub) -> None:
    session = session_pb2.Session()
    session.state.update({"cart": ["apple"], "n": 2})
    session.config.model = "local-sim-1"
    session.config.selection.max_tokens = 5000
    created = await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s1", session=session))
    assert created.name == f"{PARENT}/sessions/s1"
    assert created.etag and created.create_time.seconds > 0
    assert dict(created.state) == {"cart": ["apple"], "n": 2}
    assert created.config.selection.max_tokens == 5000
    assert await stub.GetSession(pb.GetSessionRequest(name=created.name)) == created

    generated = await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT))
    assert generated.name.startswith(f"{PARENT}/sessions/") and generated.name != created.name

    err = await rpc_error(_create(stub, "s1"))
    assert (err.code.value, err.reason) == ("ALREADY_EXISTS", "SESSION_ALREADY_EXISTS")

    await stub.DeleteSession(pb.DeleteSessionRequest(name=created.name, etag=created.etag))
    err = await rpc_error(stub.GetSession(pb.GetSessionRequest(name=created.name)))
    assert (err.code.value, err.reason) == ("NOT_FOUND", "SESSION_NOT_FOUND")


async def test_append_and_list_events(stub) -> None:
    session = await _create(stub)
    first = await stub.AppendEvent(append_request(session.name, pb_text_event("e1"), expected_etag=session.etag))
    assert first.event.name == f"{session.name}/events/e1"
    assert (first.event.sequence, first.deduplicated) == (1, False)
    assert first.event.create_time.seconds > 0 and first.session_etag != session.etag

    call = event_pb2.Event(author="agent")
    call.content.role = "model"
    call.content.parts.add().function_call.name = "get_weather"
    second = await stub.AppendEvent(append_request(session.name, call))
    assert second.event.id  # generated, and the call got an id derived from it
    assert second.event.content.parts[0].function_call.id == f"{second.event.id}.call0"

    retry = await stub.AppendEvent(append_request(session.name, pb_text_event("e1"), expected_etag=session.etag))
    assert retry.deduplicated and retry.event == first.event
    assert retry.session_etag == second.session_etag

    err = await rpc_error(stub.AppendEvent(append_request(session.name, pb_text_event("e1", "other text"))))
    assert (err.code.value, err.reason) == ("ALREADY_EXISTS", "EVENT_ID_CONFLICT")

    err = await rpc_error(stub.AppendEvent(append_request(session.name, pb_text_event("e3"), expected_etag=first.session_etag)))
    assert (err.code.value, err.reason) == ("ABORTED", "ETAG_MISMATCH")
    assert err.metadata["current_etag"] == second.session_etag

    listed = await stub.ListEvents(pb.ListEventsRequest(parent=session.name))
    assert [e.sequence for e in listed.events] == [1, 2]
    assert listed.events[0] == first.event and not listed.next_page_token
    got = await stub.GetSession(pb.GetSessionRequest(name=session.name))
    assert (got.event_count, got.last_sequence, got.etag) == (2, 2, second.session_etag)


async def test_list_events_pages_across_inserts(stub) -> None:
    session = await _create(stub)
    for i in range(1, 6):
        await stub.AppendEvent(append_request(session.name, pb_text_event(f"e{i}")))
    page = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=2))
    seen = [e.id for e in page.events]
    for i in range(6, 9):  # appended while the client is paging
        await stub.AppendEvent(append_request(session.name, pb_text_event(f"e{i}")))
    while page.next_page_token:
        page = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=2, page_token=page.next_page_token))
        seen += [e.id for e in page.events]
    assert seen == [f"e{i}" for i in range(1, 9)]

    after = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, after_sequence=6))
    assert [e.sequence for e in after.events] == [7, 8]
    # A token belongs to its request: changing after_sequence invalidates it.
    page = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=2))
    err = await rpc_error(stub.ListEvents(
        pb.ListEventsRequest(parent=session.name, page_size=2, page_token=page.next_page_token, after_sequence=1)
    ))
    assert (err.code.value, err.reason, fields(err)) == ("INVALID_ARGUMENT", "INVALID_PAGE_TOKEN", ["page_token"])


async def test_list_sessions_by_user_and_across_users(stub) -> None:
    for user, sid in (("alice", "a1"), ("bob", "b1"), ("alice", "a2"), ("carol", "c1")):
        await stub.CreateSession(pb.CreateSessionRequest(parent=f"apps/shop/users/{user}", session_id=sid))
    await stub.CreateSession(pb.CreateSessionRequest(parent="apps/other/users/alice", session_id="o1"))
    alice = await stub.ListSessions(pb.ListSessionsRequest(parent="apps/shop/users/alice"))
    assert [s.name.rsplit("/", 1)[1] for s in alice.sessions] == ["a1", "a2"]
    names = []
    page = await stub.ListSessions(pb.ListSessionsRequest(parent="apps/shop/users/-", page_size=3))
    names += [s.name for s in page.sessions]
    page = await stub.ListSessions(pb.ListSessionsRequest(parent="apps/shop/users/-", page_size=3, page_token=page.next_page_token))
    names += [s.name for s in page.sessions]
    assert [n.rsplit("/", 1)[1] for n in names] == ["a1", "b1", "a2", "c1"]
    assert not page.next_page_token
    everywhere = await stub.ListSessions(pb.ListSessionsRequest(parent="apps/-/users/alice"))
    assert [s.name.rsplit("/", 1)[1] for s in everywhere.sessions] == ["a1", "a2", "o1"]


async def test_update_session_with_masks_and_etags(stub) -> None:
    session = session_pb2.Session()
    session.state.update({"step": 1})
    session.config.model = "m1"
    session.config.selection.max_bytes = 100
    created = await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s1", session=session))

    change = session_pb2.Session(name=created.name, etag=created.etag)
    change.state.update({"step": 2})
    change.config.model = "ignored: not in the mask"
    change.config.selection.max_tokens = 7
    updated = await stub.UpdateSession(pb.UpdateSessionRequest(
        session=change, update_mask=field_mask_pb2.FieldMask(paths=["state", "config.selection"])
    ))
    assert dict(updated.state) == {"step": 2}
    assert updated.config.model == "m1"
    assert updated.config.selection.max_tokens == 7 and not updated.config.selection.HasField("max_bytes")
    assert updated.etag != created.etag

    err = await rpc_error(stub.UpdateSession(pb.UpdateSessionRequest(
        session=change, update_mask=field_mask_pb2.FieldMask(paths=["state"])
    )))
    assert (err.code.value, err.reason, err.metadata["current_etag"]) == ("ABORTED", "ETAG_MISMATCH", updated.etag)

    for paths, field in ((["name"], "update_mask.paths[0]"), ([], "update_mask")):
        err = await rpc_error(stub.UpdateSession(pb.UpdateSessionRequest(
            session=session_pb2.Session(name=created.name), update_mask=field_mask_pb2.FieldMask(paths=paths)
        )))
        assert (err.code.value, fields(err)) == ("INVALID_ARGUMENT", [field])

    bad = session_pb2.Session(name=created.name)
    bad.config.selection.max_bytes = -5
    err = await rpc_error(stub.UpdateSession(pb.UpdateSessionRequest(
        session=bad, update_mask=field_mask_pb2.FieldMask(paths=["config"])
    )))
    assert (err.reason, fields(err)) == ("INVALID_CONTEXT_CONFIG", ["session.config.selection.max_bytes"])


def _event(mutate) -> event_pb2.Event:  # type: ignore[no-untyped-def]
    event = pb_text_event("e1")
    mutate(event)
    return event


@pytest.mark.parametrize(("event", "expected"), [
    (_event(lambda e: setattr(e, "kind", event_pb2.EVENT_KIND_COMPACTION)), ["event.kind"]),
    (_event(lambda e: setattr(e, "kind", 42)), ["event.kind"]),
    (_event(lambda e: setattr(e.create_time, "seconds", 10**12)), ["event.create_time"]),
    (_event(lambda e: e.create_time.FromSeconds(4_000_000_000)), ["event.create_time"]),
    (_event(lambda e: setattr(e.cache_metadata, "state", 99)), ["event.cache_metadata.state"]),
    (_event(lambda e: setattr(e, "author", "")), ["event.author"]),
    (_event(lambda e: setattr(e, "id", "no spaces please")), ["event.id"]),
    (_event(lambda e: setattr(e.content, "role", "function")), ["event.content.role"]),
    (_event(lambda e: e.content.parts.add()), ["event.content.parts[1]"]),
    (_event(lambda e: e.content.parts.add().function_call.SetInParent()), [
        "event.content.parts[1].function_call", "event.content.parts[1].function_call.name",
    ]),
    (_event(lambda e: e.content.parts.add().function_response.response.update({"x": float("nan")})), [
        "event.content.parts[1].function_response.name", "event.content.parts[1].function_response.id",
        "event.content.parts[1].function_response.response.x",
    ]),
    (_event(lambda e: e.content.ClearField("parts")), ["event.content.parts"]),
    (_event(lambda e: setattr(e.usage, "output_tokens", -3)), ["event.usage.output_tokens"]),
    (_event(lambda e: e.long_running_tool_ids.append("c9")), ["event.long_running_tool_ids[0]"]),
])
async def test_invalid_events_name_their_fields(stub, event: event_pb2.Event, expected: list[str]) -> None:
    session = await _create(stub)
    err = await rpc_error(stub.AppendEvent(append_request(session.name, event)))
    assert err.code.value == "INVALID_ARGUMENT"
    assert fields(err) == expected
    assert (await stub.GetSession(pb.GetSessionRequest(name=session.name))).last_sequence == 0


@pytest.mark.parametrize(("call", "expected"), [
    (lambda s: s.CreateSession(pb.CreateSessionRequest(parent="apps/shop")), ["parent"]),
    (lambda s: s.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="a/b")), ["session_id"]),
    (lambda s: s.GetSession(pb.GetSessionRequest(name="apps/shop/users/alice/sessions/")), ["name"]),
    (lambda s: s.DeleteSession(pb.DeleteSessionRequest(name="sessions/x")), ["name"]),
    (lambda s: s.ListSessions(pb.ListSessionsRequest(parent=PARENT, page_size=1001)), ["page_size"]),
    (lambda s: s.ListSessions(pb.ListSessionsRequest(parent=PARENT, page_size=-1)), ["page_size"]),
    (lambda s: s.ListSessions(pb.ListSessionsRequest(parent=PARENT, page_token="garbage!")), ["page_token"]),
    (lambda s: s.ListEvents(pb.ListEventsRequest(parent=f"{PARENT}/sessions/s", after_sequence=-1)), ["after_sequence"]),
    (lambda s: s.ListEvents(pb.ListEventsRequest(parent=f"{PARENT}/sessions/s", page_size=5000)), ["page_size"]),
    (lambda s: s.AppendEvent(append_request("apps/a/users/b", pb_text_event())), ["parent"]),
])
async def test_invalid_requests_name_their_fields(stub, call, expected: list[str]) -> None:  # type: ignore[no-untyped-def]
    err = await rpc_error(call(stub))
    assert (err.code.value, fields(err)) == ("INVALID_ARGUMENT", expected)


async def test_invalid_state_and_config_at_create(stub) -> None:
    session = session_pb2.Session()
    session.state.update({"bad": float("inf")})
    session.config.compaction.compactor = policy_pb2.COMPACTOR_KIND_REMOTE
    session.config.selection.filter.content_types.append(77)
    err = await rpc_error(stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session=session)))
    assert fields(err) == ["session.state.bad"]
    session.state.Clear()
    err = await rpc_error(stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session=session)))
    assert fields(err) == ["session.config.selection.filter.content_types[0]"]
    del session.config.selection.filter.content_types[:]
    err = await rpc_error(stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session=session)))
    assert (err.reason, fields(err)) == ("INVALID_CONTEXT_CONFIG", ["session.config.compaction.remote_target"])


async def test_limits_come_from_settings(server_factory, certs_dir) -> None:  # type: ignore[no-untyped-def]
    from tests.support.servers import secure_channel

    server = await server_factory(max_event_bytes=1024, max_parts_per_event=2, max_state_bytes=64, max_page_size=5,
                                  default_session_page_size=2, default_event_page_size=3)
    async with secure_channel(server.port, certs_dir) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        session = await _create(stub)
        err = await rpc_error(stub.AppendEvent(append_request(session.name, pb_text_event("big", "x" * 2000))))
        assert fields(err) == ["event"]
        three = pb_text_event("three")
        three.content.parts.add().text = "b"
        three.content.parts.add().text = "c"
        err = await rpc_error(stub.AppendEvent(append_request(session.name, three)))
        assert fields(err) == ["event.content.parts"]
        big_state = session_pb2.Session()
        big_state.state.update({"k": "v" * 100})
        err = await rpc_error(stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session=big_state)))
        assert fields(err) == ["session.state"]
        err = await rpc_error(stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=6)))
        assert fields(err) == ["page_size"]
        for i in range(4):
            await stub.AppendEvent(append_request(session.name, pb_text_event(f"e{i}")))
        page = await stub.ListEvents(pb.ListEventsRequest(parent=session.name))
        assert len(page.events) == 3 and page.next_page_token


def _with_unknown_field(message_bytes: bytes, field_number: int = 99) -> bytes:
    """``message_bytes`` plus a varint field this schema does not define."""
    return message_bytes + bytes([(field_number << 3) & 0x7F | 0x80, field_number >> 4, 1])


async def test_unknown_fields_in_config_are_rejected(stub, channel) -> None:
    create = channel.unary_unary(
        "/agentctx.context.v1.ContextService/CreateSession",
        request_serializer=None, response_deserializer=session_pb2.Session.FromString,
    )
    selection = policy_pb2.SelectionPolicy(max_bytes=10).SerializeToString()
    config = policy_pb2.ContextConfig(model="m")
    config.selection.ParseFromString(_with_unknown_field(selection, 50))
    session = session_pb2.Session(config=config)
    request = pb.CreateSessionRequest(parent=PARENT, session_id="u1", session=session).SerializeToString()
    err = await rpc_error(create(request))
    assert (err.code.value, err.reason) == ("INVALID_ARGUMENT", "INVALID_CONTEXT_CONFIG")
    assert [(v.field, v.description) for v in err.field_violations] == [
        ("session.config.selection", "unknown field number 50"),
    ]
    top = policy_pb2.ContextConfig()
    top.ParseFromString(_with_unknown_field(b"", 77))
    request = pb.CreateSessionRequest(parent=PARENT, session_id="u2", session=session_pb2.Session(config=top))
    err = await rpc_error(create(request.SerializeToString()))
    assert fields(err) == ["session.config"]
    # Nothing was created; an unknown field outside config is ignored as usual.
    outside = _with_unknown_field(pb.CreateSessionRequest(parent=PARENT, session_id="u3").SerializeToString(), 40)
    assert (await create(outside)).name.endswith("/u3")
    err = await rpc_error(stub.GetSession(pb.GetSessionRequest(name=f"{PARENT}/sessions/u1")))
    assert err.reason == "SESSION_NOT_FOUND"


async def test_32_concurrent_appenders_through_grpc(stub) -> None:
    session = await _create(stub)

    async def appender(n: int) -> list[int]:
        out = []
        for i in range(8):
            reply = await stub.AppendEvent(append_request(session.name, pb_text_event(f"w{n}-{i}")))
            out.append(reply.event.sequence)
        return out

    results = await asyncio.gather(*(appender(n) for n in range(32)))
    assert sorted(s for r in results for s in r) == list(range(1, 257))
    listed = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=1000))
    assert [e.sequence for e in listed.events] == list(range(1, 257))
    assert len({e.id for e in listed.events}) == 256


async def test_errors_never_crash_into_internal(stub) -> None:
    session = await _create(stub)
    # A timestamp Python cannot represent, in a config filter.
    bad = session_pb2.Session(name=session.name)
    bad.config.selection.filter.start_time.seconds = -(10**15)
    err = await rpc_error(stub.UpdateSession(pb.UpdateSessionRequest(
        session=bad, update_mask=field_mask_pb2.FieldMask(paths=["config"])
    )))
    assert fields(err) == ["session.config.selection.filter.start_time"]
    assert err.code.value == "INVALID_ARGUMENT"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetSession(pb.GetSessionRequest(name=session.name + "/events/e"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_batch_append_is_one_transaction_and_idempotent(stub) -> None:
    session = await _create(stub, "batch")
    events = [pb_text_event("b1", "one"), pb_text_event("", "two"), pb_text_event("b3", "three")]
    first = await stub.BatchAppendEvents(pb.BatchAppendEventsRequest(parent=session.name, events=events))
    assert [e.sequence for e in first.events] == [1, 2, 3]
    assert [e.content.parts[0].text for e in first.events] == ["one", "two", "three"]
    assert first.events[0].name == f"{session.name}/events/b1" and first.events[1].id
    assert first.session_etag != session.etag
    # A retry with the ids the first call assigned stores nothing twice.
    events[1].id = first.events[1].id
    again = await stub.BatchAppendEvents(pb.BatchAppendEventsRequest(parent=session.name, events=events))
    assert [e.sequence for e in again.events] == [1, 2, 3]
    # One bad event: nothing of the batch is stored, its path is named.
    bad = event_pb2.Event(id="b5", author="agent")
    bad.content.role = "robot"
    bad.content.parts.add().text = "x"
    err = await rpc_error(stub.BatchAppendEvents(pb.BatchAppendEventsRequest(
        parent=session.name, events=[pb_text_event("b4"), bad])))
    assert (err.code.value, err.reason) == ("INVALID_ARGUMENT", "INVALID_EVENT")
    assert fields(err) == ["events[1].content.role"]
    err = await rpc_error(stub.BatchAppendEvents(pb.BatchAppendEventsRequest(
        parent=session.name, events=[pb_text_event("b6"), pb_text_event("b6")])))
    assert fields(err) == ["events"]
    err = await rpc_error(stub.BatchAppendEvents(pb.BatchAppendEventsRequest(parent=session.name)))
    assert fields(err) == ["events"]
    listed = await stub.ListEvents(pb.ListEventsRequest(parent=session.name))
    assert [e.id for e in listed.events] == ["b1", first.events[1].id, "b3"]
    err = await rpc_error(stub.BatchAppendEvents(pb.BatchAppendEventsRequest(
        parent=f"{PARENT}/sessions/missing", events=[pb_text_event("m1")])))
    assert (err.code.value, err.reason) == ("NOT_FOUND", "SESSION_NOT_FOUND")
