"""The API ADK needs, on both backends: state deltas written with their
event, app and user state shared across sessions, action-only events,
ListEvents after_time/most_recent and ListSessions by update time."""

from __future__ import annotations

import datetime as dt

import pytest
from google.protobuf import struct_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import session_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from tests.sessions.helpers import rpc_error

PARENT = "apps/shop/users/alice"


def _struct(value: dict) -> struct_pb2.Struct:  # type: ignore[type-arg]
    out = struct_pb2.Struct()
    out.update(value)
    return out


def _event(event_id: str, text: str | None = "hi", when: int | None = None) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user")
    if text is not None:
        event.content.CopyFrom(content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)]))
    if when is not None:
        event.create_time.FromSeconds(when)
    return event


async def test_deltas_merge_by_key_into_each_scope_with_the_event(stub) -> None:  # type: ignore[no-untyped-def]
    first = await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s1", session=session_pb2.Session(
        state=_struct({"a": 1, "keep": True}), app_state=_struct({"theme": "dark"}), user_state=_struct({"n": 1}))))
    assert dict(first.app_state) == {"theme": "dark"} and dict(first.user_state) == {"n": 1}
    delta = session_pb2.StateDelta(session=_struct({"a": 2}), user=_struct({"m": 2}), app=_struct({"lang": "en"}))
    reply = await stub.AppendEvent(pb.AppendEventRequest(parent=first.name, event=_event("e1", text=None),
                                                         state_delta=delta, expected_etag=first.etag))
    assert reply.HasField("session_update_time")
    got = await stub.GetSession(pb.GetSessionRequest(name=first.name))
    assert dict(got.state) == {"a": 2, "keep": True}
    assert dict(got.user_state) == {"n": 1, "m": 2}
    assert dict(got.app_state) == {"theme": "dark", "lang": "en"}
    assert got.etag == reply.session_etag and got.last_sequence == 1
    # A retry of the stored id applies nothing again.
    again = await stub.AppendEvent(pb.AppendEventRequest(
        parent=first.name, event=_event("e1", text=None),
        state_delta=session_pb2.StateDelta(session=_struct({"a": 99}))))
    assert again.deduplicated
    assert dict((await stub.GetSession(pb.GetSessionRequest(name=first.name))).state)["a"] == 2
    # Another user shares the app's state only.
    bob = await stub.CreateSession(pb.CreateSessionRequest(parent="apps/shop/users/bob", session_id="s1"))
    assert dict(bob.app_state) == {"theme": "dark", "lang": "en"} and dict(bob.user_state) == {}
    shared = await stub.GetSharedState(pb.GetSharedStateRequest(parent=PARENT))
    assert dict(shared.user_state) == {"n": 1, "m": 2}
    # A stale etag stores neither the event nor its delta.
    err = await rpc_error(stub.AppendEvent(pb.AppendEventRequest(
        parent=first.name, event=_event("e2"), expected_etag=first.etag,
        state_delta=session_pb2.StateDelta(app=_struct({"lang": "fr"})))))
    assert err.code.value == "ABORTED"
    assert dict((await stub.GetSharedState(pb.GetSharedStateRequest(parent=PARENT))).app_state)["lang"] == "en"


async def test_action_only_events_are_listed_and_filters_apply(stub) -> None:  # type: ignore[no-untyped-def]
    session = await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s2"))
    for i in range(1, 6):
        await stub.AppendEvent(pb.AppendEventRequest(parent=session.name, event=_event(f"e{i}", text=None if i == 2 else "x",
                                                                                       when=1000 + i)))
    listed = await stub.ListEvents(pb.ListEventsRequest(parent=session.name))
    assert [e.id for e in listed.events] == ["e1", "e2", "e3", "e4", "e5"]
    assert not listed.events[1].HasField("content")
    built = await stub.BuildContext(pb.BuildContextRequest(session=session.name))
    assert len(built.request.contents) == 4
    after = pb.ListEventsRequest(parent=session.name, most_recent=3)
    after.after_time.FromSeconds(1004)
    assert [e.id for e in (await stub.ListEvents(after)).events] == ["e4", "e5"]
    paged = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, most_recent=3, page_size=2))
    rest = await stub.ListEvents(pb.ListEventsRequest(parent=session.name, most_recent=3, page_size=2,
                                                      page_token=paged.next_page_token))
    assert [e.id for e in [*paged.events, *rest.events]] == ["e3", "e4", "e5"]
    err = await rpc_error(stub.ListEvents(pb.ListEventsRequest(parent=session.name, most_recent=-1)))
    assert err.code.value == "INVALID_ARGUMENT"


async def test_sessions_list_by_update_time(stub) -> None:  # type: ignore[no-untyped-def]
    names = []
    for sid in ("a", "b", "c"):
        names.append((await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id=sid))).name)
    future = int(dt.datetime.now(dt.UTC).timestamp()) + 60
    await stub.AppendEvent(pb.AppendEventRequest(parent=names[0], event=_event("e1", when=future)))
    by_update = pb.ListSessionsRequest(parent=PARENT, order_by="update_time", page_size=2)
    page = await stub.ListSessions(by_update)
    by_update.page_token = page.next_page_token
    rest = await stub.ListSessions(by_update)
    assert [s.name.rsplit("/", 1)[-1] for s in [*page.sessions, *rest.sessions]] == ["b", "c", "a"]
    assert (await stub.ListSessions(pb.ListSessionsRequest(parent=PARENT))).sessions[0].name == names[0]
    err = await rpc_error(stub.ListSessions(pb.ListSessionsRequest(parent=PARENT, order_by="name")))
    assert err.code.value == "INVALID_ARGUMENT"


@pytest.mark.parametrize("scope", ["session", "user", "app"])
async def test_a_delta_too_deep_or_not_finite_is_refused(stub, scope: str) -> None:  # type: ignore[no-untyped-def]
    session = await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id=f"d{scope}"))
    delta = session_pb2.StateDelta()
    getattr(delta, scope).update({"x": float("nan")})
    err = await rpc_error(stub.AppendEvent(pb.AppendEventRequest(parent=session.name, event=_event("e1"),
                                                                 state_delta=delta)))
    assert err.code.value == "INVALID_ARGUMENT"
    assert (await stub.GetSession(pb.GetSessionRequest(name=session.name))).last_sequence == 0
