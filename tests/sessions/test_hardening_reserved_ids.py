""""-", "." and ".." are never ids (hardening: they were accepted, and "-" is
the list wildcard, so ``apps/a/users/-/sessions/-`` was ambiguous). The
wildcards stay where a list allows them."""

from __future__ import annotations

import datetime as dt

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.errors import InvalidArgument
from agentctx_common.status import error_from_rpc
from context_service.domain.event_validation import event_violations
from context_service.domain.limits import Limits
from context_service.domain.model import Content, Event, Part
from context_service.domain.names import check_session_id, parse_session_name, parse_user_parent
from context_service.domain.turn_rules import input_violations

RESERVED = ["-", ".", ".."]
LIMITS = Limits()
NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)


def _fields(exc: pytest.ExceptionInfo[InvalidArgument]) -> list[str]:
    return [v.field for v in exc.value.field_violations]


@pytest.mark.parametrize("bad", RESERVED)
@pytest.mark.parametrize("template", ["apps/{}/users/u/sessions/s", "apps/a/users/{}/sessions/s", "apps/a/users/u/sessions/{}"])
def test_session_names_refuse_reserved_ids(bad: str, template: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        parse_session_name(template.format(bad), LIMITS, "session")
    assert _fields(exc) == ["session"]


@pytest.mark.parametrize("bad", RESERVED)
def test_session_ids_and_event_ids_refuse_reserved_ids(bad: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        check_session_id(bad, LIMITS)
    assert _fields(exc) == ["session_id"]
    event = Event(id=bad, author="user", content=Content("user", (Part(text="hi"),)))
    assert [v.field for v in event_violations(event, LIMITS, size_bytes=10, now=NOW)] == ["event.id"]
    ok = Event(id="e1", author="user", content=Content("user", (Part(text="hi"),)))
    fields = [v.field for v in input_violations([ok], [10], LIMITS, now=NOW, reply_id=bad, prefix="turn.")]
    assert fields == ["turn.reply_event_id"]


@pytest.mark.parametrize("bad", [".", ".."])
def test_user_parents_refuse_dots_even_where_wildcards_are_allowed(bad: str) -> None:
    for parent in (f"apps/{bad}/users/u", f"apps/a/users/{bad}"):
        for wildcards in (False, True):
            with pytest.raises(InvalidArgument):
                parse_user_parent(parent, LIMITS, wildcards=wildcards)


def test_wildcards_stay_where_lists_allow_them_and_ids_with_dots_stay_valid() -> None:
    assert parse_user_parent("apps/-/users/-", LIMITS, wildcards=True) == ("-", "-")
    with pytest.raises(InvalidArgument):
        parse_user_parent("apps/a/users/-", LIMITS)
    for good in ("...", ".a", "a.", "a..b", "-a", "a-", "--", "v1.2"):
        assert parse_session_name(f"apps/{good}/users/{good}/sessions/{good}", LIMITS).session == good
        check_session_id(good, LIMITS)


# --- over gRPC -------------------------------------------------------------------


async def _violations(call) -> list[str]:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await call
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = error_from_rpc(exc.value)
    return [v.field for v in error.field_violations]


def _event(event_id: str = "") -> event_pb2.Event:
    return event_pb2.Event(id=event_id, author="user",
                           content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="hi")]))


@pytest.mark.parametrize("bad", RESERVED)
async def test_every_rpc_taking_an_id_refuses_reserved_ids(stub, bad: str) -> None:  # type: ignore[no-untyped-def]
    assert await _violations(stub.CreateSession(pb.CreateSessionRequest(parent="apps/a1/users/u1", session_id=bad))) == ["session_id"]
    assert await _violations(stub.CreateSession(pb.CreateSessionRequest(parent=f"apps/a1/users/{bad}", session_id="s"))) == ["parent"]
    assert await _violations(stub.GetSession(pb.GetSessionRequest(name=f"apps/a1/users/u1/sessions/{bad}"))) == ["name"]
    session = "apps/a1/users/u1/sessions/s1"
    await stub.CreateSession(pb.CreateSessionRequest(parent="apps/a1/users/u1", session_id="s1"))
    assert await _violations(stub.AppendEvent(pb.AppendEventRequest(parent=session, event=_event(bad)))) == ["event.id"]
    turn = pb.GenerateRequest(session=session, reply_event_id=bad, input=[_event("in1")])
    assert await _violations(stub.Generate(turn)) == ["reply_event_id"]
    assert await _violations(stub.Generate(pb.GenerateRequest(session=session, input=[_event(bad)]))) == ["input[0].id"]
    # The list wildcards still list.
    listed = await stub.ListSessions(pb.ListSessionsRequest(parent="apps/a1/users/-"))
    assert [s.name for s in listed.sessions] == [session]
