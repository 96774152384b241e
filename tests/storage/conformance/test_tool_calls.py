"""The store contract, tool calls (ports.ToolCalls and the session store's
part of it), on every backend: rows stored with their reply event (not on
a retry), staging only while open and live, a function response collecting
the staged delta and attachments and publishing staged artifact versions in
its own transaction, late responses and the sweeper dropping them (bytes
included), and session deletion."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from agentctx_common.errors import PermissionDenied
from context_service.domain.artifacts import ArtifactScope
from context_service.domain.model import Content, Event, FunctionCall, FunctionResponse, Part
from context_service.domain.session_records import StateDelta
from context_service.domain.tool_tokens import OpenCall, Staged, ToolClaims, mask_of, merge_delta
from context_service.storage.factory import Backend
from tests.storage.conformance.support import KEY, new_session
from tests.storage.conformance.test_artifacts import load, save

SCOPE = ArtifactScope(KEY.app, KEY.user, KEY.session)


def _call(call_id: str, token_id: str, expires: dt.datetime) -> OpenCall:
    claims = ToolClaims("k", token_id, KEY.app, KEY.user, KEY.session, "m1", call_id, "tool", mask_of(()),
                        expires.timestamp())
    return OpenCall(claims, expires)


def _model(*call_ids: str) -> Event:
    return Event(id="m1", author="agent", content=Content("model", tuple(
        Part(function_call=FunctionCall(c, "tool")) for c in call_ids)))


def _response(call_id: str, event_id: str = "") -> Event:
    return Event(id=event_id or f"r-{call_id}", author="user", content=Content("user", (
        Part(function_response=FunctionResponse(call_id, "tool", {"ok": True})),)))


def _set(**session: object):  # type: ignore[no-untyped-def]
    def change(staged: Staged) -> None:
        staged.delta = merge_delta(staged.delta, StateDelta(session=dict(session)))
    return change


async def test_rows_ride_their_event_and_a_response_collects_them(stores: Backend) -> None:
    sessions, calls = stores.sessions, stores.tool_calls
    await new_session(sessions)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    a, b = _call("a", "t" * 24, later), _call("b", "u" * 24, later)
    first = await sessions.append_event(KEY, _model("a", "b"), open_calls=[a, b])
    # A retry of the same append stores no second set of rows.
    retry = await sessions.append_event(KEY, _model("a", "b"), open_calls=[_call("a", "v" * 24, later)])
    assert not first.deduplicated and retry.deduplicated
    with pytest.raises(PermissionDenied):
        await calls.check(_call("a", "v" * 24, later).claims)
    assert (await calls.check(a.claims)).delta == StateDelta()
    await calls.stage(a.claims, _set(x=1))
    staged = await calls.stage(a.claims, lambda s: s.attachments.append({"text": "attached"}))
    assert staged.delta.session == {"x": 1} and len(staged.attachments) == 1
    await save(stores.artifacts, SCOPE, "out.txt", b"made by a", text=True, staged_call=a.claims.token_id)
    assert await stores.artifacts.list_names(KEY.app, KEY.user, KEY.session) == []
    assert await stores.artifacts.list_names(KEY.app, KEY.user, KEY.session, call=a.claims.token_id) == ["out.txt"]
    assert await calls.any_open(KEY, ["a"]) and not await calls.any_open(KEY, ["zzz"])

    stored = await sessions.append_event(KEY, _response("a"))
    assert [p.text for p in stored.event.content.parts if p.text] == ["attached"]  # type: ignore[union-attr]
    assert (await sessions.get_session(KEY)).state == {"x": 1}
    assert await load(stores.artifacts, SCOPE, "out.txt") == b"made by a"
    for step in (calls.check(a.claims), calls.stage(a.claims, _set(y=2))):
        with pytest.raises(PermissionDenied):
            await step
    assert await calls.check(b.claims) == Staged()  # b is still open
    # The batch path collects too.
    await sessions.append_events(KEY, [dataclasses.replace(_response("b"), id="rb")])
    with pytest.raises(PermissionDenied):
        await calls.check(b.claims)


async def test_late_responses_the_sweeper_and_deletion_drop_staged_effects(stores: Backend) -> None:
    sessions, calls = stores.sessions, stores.tool_calls
    await new_session(sessions)
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    late, swept, kept = _call("late", "l" * 24, past), _call("swept", "s" * 24, past), _call("kept", "k" * 24, soon)
    await sessions.append_event(KEY, _model("late", "swept", "kept"), open_calls=[late, swept, kept])
    for call in (late, swept, kept):
        await save(stores.artifacts, SCOPE, f"{call.claims.call_id}.bin", call.claims.token_id.encode(),
                   staged_call=call.claims.token_id)
    before = await stores.artifacts.stored_bytes(KEY.app)
    # Past their deadline: staging is refused; a late response lands alone.
    with pytest.raises(PermissionDenied):
        await calls.stage(late.claims, _set(x=1))
    stored = await sessions.append_event(KEY, _response("late"))
    assert len(stored.event.content.parts) == 1  # type: ignore[union-attr]
    assert await calls.drop_expired() == 1  # "swept"; "late" was closed by its response
    after = await stores.artifacts.stored_bytes(KEY.app)
    assert after == (before[0] - 2, before[1] - 2 * 24)
    assert await stores.artifacts.list_names(KEY.app, KEY.user, KEY.session, call=late.claims.token_id) == []
    # Deleting the session drops the open call's staged bytes too.
    await sessions.delete_session(KEY)
    assert await stores.artifacts.stored_bytes(KEY.app) == (0, 0)
    with pytest.raises(PermissionDenied):
        await calls.check(kept.claims)
    assert await calls.purge(dt.timedelta(0)) == 0  # rows of a deleted session are gone already
