"""AgentCtxSessionService against ADK's own DatabaseSessionService (SQLite
file), differentially: every scenario runs on both services and what ADK's
API shows of it (returned sessions, states, events, errors) must be equal.
Written for this repository (never copied from ADK); it covers what ADK's
session-service suite checks: create/get/list/delete, the app:/user:/temp:
state scopes, append_event with state deltas, GetSessionConfig, stale
sessions and the event fields' round trip. Run in the ADK venv by
test_adk_parity.py against a context service that test starts."""

from __future__ import annotations

import asyncio
import itertools
import os
import pathlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from agentctx_adk import AgentCtxSessionService
from google.adk.events import Event, EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from agentctx_client import TlsConfig

_runs = itertools.count()
Scenario = Callable[[BaseSessionService], Awaitable[Any]]
T0 = 1_760_000_000.0  # event times: fixed, so that both services see the same


# Every scenario with the event cache (the default), with a cache of one
# session or of 4 KiB (evictions between and within sessions), and without.
@pytest.fixture(params=[(256, 64 << 20), (1, 64 << 20), (256, 4096), (0, 0)],
                ids=["cached", "cache1", "cache4k", "uncached"])
async def services(request: pytest.FixtureRequest,
                   tmp_path: pathlib.Path) -> AsyncIterator[dict[str, BaseSessionService]]:
    ours = AgentCtxSessionService.connect(
        os.environ["AGENTCTX_ADK_TARGET"], tls=TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost"),
        app_prefix=f"{os.environ['AGENTCTX_ADK_RUN']}.{next(_runs)}.", cached_sessions=request.param[0],
        cached_bytes=request.param[1])
    theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.sqlite'}")
    try:
        yield {"agentctx": ours, "adk": theirs}
    finally:
        await ours.close()
        await theirs.close()


async def same(services: dict[str, BaseSessionService], scenario: Scenario) -> Any:
    """What ``scenario`` observes, equal on both services (ADK's shown)."""
    seen = {name: await scenario(service) for name, service in services.items()}
    assert seen["agentctx"] == seen["adk"], "\n".join(differences(seen["agentctx"], seen["adk"]))
    return seen["adk"]


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two observations differ: "path: agentctx's != ADK's"."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [d for k in sorted(set(ours) | set(theirs), key=str)
                for d in differences(ours.get(k, "<absent>"), theirs.get(k, "<absent>"), f"{path}.{k}")]
    if isinstance(ours, list | tuple) and isinstance(theirs, list | tuple) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path or '.'}: {ours!r} != {theirs!r}"]


async def outcome(call: Awaitable[Any]) -> Any:
    """The call's result, or the name of the exception it raised."""
    try:
        return await call
    except Exception as exc:  # noqa: BLE001 - the error is the observation
        return type(exc).__name__


def shown(session: Session | None) -> Any:
    """A session as ADK's API shows it, times rounded to microseconds."""
    if session is None:
        return None
    return {"id": session.id, "app": session.app_name, "user": session.user_id, "state": session.state,
            "events": [event_dump(e) for e in session.events], "updated": round(session.last_update_time, 6)}


def event_dump(event: Event) -> dict[str, Any]:
    data = event.model_dump(mode="json", exclude_none=True)
    data["timestamp"] = round(event.timestamp, 6)
    return data


def text_event(i: int, author: str = "user", **kwargs: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(id=f"e{i}", invocation_id=f"inv{i}", author=author, timestamp=T0 + i,
                 content=types.Content(role=role, parts=[types.Part(text=f"message {i}")]), **kwargs)


def delta_event(i: int, delta: dict[str, Any]) -> Event:
    return Event(id=f"d{i}", invocation_id=f"inv{i}", author="agent", timestamp=T0 + i,
                 actions=EventActions(state_delta=delta))


# --- create, get, list, delete -------------------------------------------------------


async def test_missing_sessions_read_as_none(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        await svc.create_session(app_name="app", user_id="u", session_id="s")
        return [shown(await svc.get_session(app_name="app", user_id="u", session_id="nope")),
                shown(await svc.get_session(app_name="app", user_id="other", session_id="s")),
                shown(await svc.get_session(app_name="other", user_id="u", session_id="s")),
                [shown(s) for s in (await svc.list_sessions(app_name="empty")).sessions],
                await svc.get_user_state(app_name="app", user_id="nobody")]

    assert await same(services, scenario) == [None, None, None, [], {}]


async def test_create_then_get_and_ids(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        created = await svc.create_session(app_name="app", user_id="u", session_id="s1", state={"k": "v", "n": 1})
        got = await svc.get_session(app_name="app", user_id="u", session_id="s1")
        generated = await svc.create_session(app_name="app", user_id="u")
        again = await svc.get_session(app_name="app", user_id="u", session_id=generated.id)
        duplicate = await outcome(svc.create_session(app_name="app", user_id="u", session_id="s1"))
        assert got is not None and again is not None
        return {"created": {**shown(created), "updated": None}, "got": {**shown(got), "updated": None},
                "times_equal": created.last_update_time == got.last_update_time,
                "generated_id": bool(generated.id) and again.id == generated.id, "duplicate": duplicate}

    seen = await same(services, scenario)
    assert seen["got"]["state"] == {"k": "v", "n": 1} and seen["duplicate"] == "AlreadyExistsError"


async def test_list_per_user_and_for_all_users(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        for user, sid in (("u1", "a"), ("u2", "b"), ("u1", "c")):
            await svc.create_session(app_name="app", user_id=user, session_id=sid, state={f"user:{user}": 1})
            await asyncio.sleep(0.002)  # distinct creation times
        s = await svc.get_session(app_name="app", user_id="u1", session_id="a")
        assert s is not None
        now = Event(id="n1", invocation_id="i", author="user")  # stamped now, as a Runner's events are
        await svc.append_event(s, now)  # "a" becomes the most recently updated
        await svc.create_session(app_name="other", user_id="u1", session_id="x")

        def listed(response: Any) -> Any:
            return [(x.user_id, x.id, x.state, x.events) for x in response.sessions]

        return {"u1": listed(await svc.list_sessions(app_name="app", user_id="u1")),
                "all": listed(await svc.list_sessions(app_name="app")),
                "nobody": listed(await svc.list_sessions(app_name="app", user_id="nobody"))}

    seen = await same(services, scenario)
    assert [(u, i) for u, i, _, _ in seen["all"]] == [("u2", "b"), ("u1", "c"), ("u1", "a")]


async def test_delete(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s", state={"user:k": 1, "app:a": 2})
        await svc.create_session(app_name="app", user_id="u", session_id="t")
        await svc.append_event(s, text_event(1))
        await svc.delete_session(app_name="app", user_id="u", session_id="s")
        missing = await outcome(svc.delete_session(app_name="app", user_id="u", session_id="never"))
        stale_append = await outcome(svc.append_event(s, text_event(2)))
        gone = shown(await svc.get_session(app_name="app", user_id="u", session_id="s"))
        again = await svc.create_session(app_name="app", user_id="u", session_id="s")
        return {"gone": gone,
                "missing": missing, "append_after_delete": stale_append,
                "listed": [x.id for x in (await svc.list_sessions(app_name="app", user_id="u")).sessions],
                "user_state": await svc.get_user_state(app_name="app", user_id="u"), "recreated": again.state,
                "recreated_events": again.events}

    seen = await same(services, scenario)
    assert seen["gone"] is None and seen["recreated_events"] == []
    assert seen["append_after_delete"] == "SessionNotFoundError"


# --- state scopes and deltas ----------------------------------------------------------


async def test_state_scopes_across_sessions_and_users(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s11 = await svc.create_session(app_name="app", user_id="u1", session_id="s11",
                                       state={"app:shared": "a", "user:pref": "dark", "own": 1, "temp:scratch": "t"})
        created = dict(s11.state)
        await svc.append_event(s11, delta_event(1, {"app:shared": "a2", "user:pref": "light", "own": 2, "new": [1, 2],
                                                    "temp:step": 3}))
        in_memory = dict(s11.state)
        stored_delta = s11.events[-1].actions.state_delta
        s12 = await svc.create_session(app_name="app", user_id="u1", session_id="s12", state={"own": "s12"})
        s2 = await svc.create_session(app_name="app", user_id="u2", session_id="s2")
        reread = await svc.get_session(app_name="app", user_id="u1", session_id="s11")
        other_app = await svc.create_session(app_name="app2", user_id="u1", session_id="s")
        assert reread is not None
        return {"created": created, "in_memory": in_memory, "stored_delta": stored_delta, "s12": s12.state,
                "s2": s2.state, "reread": reread.state, "reread_delta": reread.events[-1].actions.state_delta,
                "user_state": await svc.get_user_state(app_name="app", user_id="u1"), "other_app": other_app.state}

    seen = await same(services, scenario)
    assert seen["s2"] == {"app:shared": "a2"} and "temp:step" not in seen["reread"]
    assert seen["user_state"] == {"pref": "light"}


async def test_deltas_merge_by_key_and_values_keep_their_json_types(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s", state={"a": 1, "b": {"x": 1}})
        values = {"int": 3, "float": 2.5, "neg": -7, "bool": True, "none": None, "text": "é",
                  "list": [1, "two", [3.5]], "nested": {"k": {"deep": [True]}}, "big": 2**40}
        await svc.append_event(s, delta_event(1, {"b": {"y": 2}, **values}))
        await svc.append_event(s, delta_event(2, {"a": "replaced", "user:u": 1}))
        await svc.append_event(s, delta_event(3, {"user:u": 2, "app:x": {"n": 1}}))
        got = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        return {"state": got.state, "types": {k: type(v).__name__ for k, v in got.state.items()},
                "in_memory": s.state, "deltas": [e.actions.state_delta for e in got.events]}

    seen = await same(services, scenario)
    assert seen["state"]["b"] == {"y": 2} and seen["state"]["a"] == "replaced"


async def test_a_delta_value_replaces_the_stored_one_whole_and_null_is_a_value(
        services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u1", session_id="s", state={
            "profile": {"name": "ada", "role": "admin"}, "flag": False, "gone": True,
            "app:cfg": {"a": 1, "b": 2}, "user:pref": "dark"})
        await svc.append_event(s, delta_event(1, {"profile": {"name": "bob"}, "gone": None,
                                                  "app:cfg": {"a": 9}, "user:pref": None}))
        await svc.append_event(s, delta_event(2, {"other": True}))
        got = await svc.get_session(app_name="app", user_id="u1", session_id="s")
        same_user = await svc.create_session(app_name="app", user_id="u1", session_id="s2")
        other_user = await svc.create_session(app_name="app", user_id="u2", session_id="s3")
        assert got is not None
        return {"read": got.state, "in_memory": s.state, "same_user": same_user.state,
                "other_user": other_user.state}

    seen = await same(services, scenario)
    assert seen["read"]["profile"] == {"name": "bob"} and "gone" in seen["read"] and seen["read"]["gone"] is None
    assert seen["read"]["flag"] is False and seen["other_user"] == {"app:cfg": {"a": 9}}
    assert seen["same_user"] == {"app:cfg": {"a": 9}, "user:pref": None}


async def test_one_session_id_under_two_users_is_two_sessions(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        first = await svc.create_session(app_name="app", user_id="u1", session_id="s1", state={"k": 1})
        await svc.append_event(first, text_event(1))
        await svc.create_session(app_name="app", user_id="u2", session_id="s1")
        # Update times left out: event 1 lies before the session (a known difference).
        return [{**shown(await svc.get_session(app_name="app", user_id=u, session_id="s1")), "updated": None}
                for u in ("u1", "u2")]

    seen = await same(services, scenario)
    assert [s["user"] for s in seen] == ["u1", "u2"] and [len(s["events"]) for s in seen] == [1, 0]


async def test_appending_to_a_session_never_created(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        await svc.create_session(app_name="app", user_id="u", session_id="real")
        ghost = Session(id="never", app_name="app", user_id="u")
        return [await outcome(svc.append_event(ghost, text_event(1))),
                shown(await svc.get_session(app_name="app", user_id="u", session_id="never"))]

    assert await same(services, scenario) == ["SessionNotFoundError", None]


async def test_user_state_read_without_a_session(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u1")
        await svc.append_event(s, delta_event(1, {"user:profile": {"name": "Ann"}, "user:n": 1, "mine": 1}))
        await svc.append_event(s, delta_event(2, {"user:n": 2, "app:shared": True}))
        return {"u1": await svc.get_user_state(app_name="app", user_id="u1"),
                "u2": await svc.get_user_state(app_name="app", user_id="u2"),
                "other_app": await svc.get_user_state(app_name="other", user_id="u1")}

    assert await same(services, scenario) == {"u1": {"profile": {"name": "Ann"}, "n": 2}, "u2": {}, "other_app": {}}


async def test_event_times_in_a_repeated_local_hour(services: dict[str, BaseSessionService]) -> None:
    """Instants in the hour a local clock repeats (US Eastern, 2024-11-03)
    read back as they were written: no service goes through local time."""
    repeated = [1730613600.0, 1730615400.0, 1730617200.5]
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        async def scenario(svc: BaseSessionService) -> Any:
            s = await svc.create_session(app_name="app", user_id="u", session_id="s")
            for i, stamp in enumerate(repeated):
                await svc.append_event(s, Event(id=f"t{i}", author="user", timestamp=stamp))
            got = await svc.get_session(app_name="app", user_id="u", session_id="s")
            assert got is not None
            return [e.timestamp for e in got.events]

        assert await same(services, scenario) == repeated
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


async def test_an_event_appended_twice_is_kept_once(services: dict[str, BaseSessionService]) -> None:
    """The same event delivered twice (the same object or an equal copy) is
    stored once, its delta applied once, and the in-memory session holds
    it once, as ADK's in-memory service keeps it (ADK's database service
    refuses the second insert, so it is not the reference here)."""
    reference = InMemorySessionService()  # type: ignore[no-untyped-call]

    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s", state={"n": 0})
        event = delta_event(1, {"n": 1, "user:seen": 1})
        for delivery in (event, event, event.model_copy(deep=True)):
            await svc.append_event(s, delivery)
        got = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        return {"in_memory": [e.id for e in s.events], "stored": [e.id for e in got.events],
                "state": got.state, "in_memory_state": s.state}

    ours = await scenario(services["agentctx"])
    assert ours == await scenario(reference)
    assert ours["in_memory"] == ours["stored"] == ["d1"]


async def test_known_difference_a_whole_float_reads_back_as_an_int(services: dict[str, BaseSessionService]) -> None:
    """Documented (README, ADK): agentctx stores JSON numbers as doubles, so
    2.0 and 2 read back alike, as ints; ADK's JSON column keeps 2.0."""
    got = {}
    for name, svc in services.items():
        s = await svc.create_session(app_name="app", user_id="u", session_id="s", state={"w": 2.0, "f": 2.5})
        await svc.append_event(s, delta_event(1, {"d": 3.0}))
        read = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert read is not None
        got[name] = {k: (v, type(v).__name__) for k, v in read.state.items()}
    assert got["adk"] == {"w": (2.0, "float"), "f": (2.5, "float"), "d": (3.0, "float")}
    assert got["agentctx"] == {"w": (2, "int"), "f": (2.5, "float"), "d": (3, "int")}


# --- GetSessionConfig -----------------------------------------------------------------


async def test_get_session_config_filters(services: dict[str, BaseSessionService]) -> None:
    configs = [GetSessionConfig(num_recent_events=n) for n in (0, 1, 3, 5, 50)]
    configs += [GetSessionConfig(after_timestamp=T0 + t) for t in (0, 1, 3, 3.5, 5, 6)]
    configs += [GetSessionConfig(num_recent_events=2, after_timestamp=T0 + 2),
                GetSessionConfig(num_recent_events=4, after_timestamp=T0 + 4), GetSessionConfig()]

    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s", state={"k": 0})
        for i in range(1, 6):
            await svc.append_event(s, text_event(i, "user" if i % 2 else "agent"))
        empty = await svc.create_session(app_name="app", user_id="u", session_id="empty")
        out = []
        for config in configs:
            got = await svc.get_session(app_name="app", user_id="u", session_id="s", config=config)
            none = await svc.get_session(app_name="app", user_id="u", session_id=empty.id, config=config)
            assert got is not None and none is not None
            out.append(([e.id for e in got.events], [e.timestamp for e in got.events], got.state, none.events))
        return out

    seen = await same(services, scenario)
    assert seen[0][0] == [] and seen[2][0] == ["e3", "e4", "e5"] and seen[7][0] == ["e3", "e4", "e5"]


# --- stale sessions -------------------------------------------------------------------


async def test_stale_sessions(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s")
        a = await svc.get_session(app_name="app", user_id="u", session_id="s")
        b = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert a is not None and b is not None
        first = await outcome(svc.append_event(a, text_event(1)))
        stale = await outcome(svc.append_event(b, text_event(2)))
        from_create = await outcome(svc.append_event(s, text_event(3)))  # also read before event 1
        reread = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert reread is not None
        after_reread = await outcome(svc.append_event(reread, text_event(4)))
        again = await outcome(svc.append_event(reread, text_event(5)))  # the same object: kept current
        c, d = [await svc.get_session(app_name="app", user_id="u", session_id="s") for _ in range(2)]
        assert c is not None and d is not None
        raced = await asyncio.gather(svc.append_event(c, text_event(6)), svc.append_event(d, text_event(7)),
                                     return_exceptions=True)
        final = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert final is not None
        return {"first": isinstance(first, Event), "stale": stale, "from_create": from_create,
                "after_reread": isinstance(after_reread, Event), "again": isinstance(again, Event),
                "raced": sorted(type(r).__name__ for r in raced),
                "stored": len(final.events), "b_events": [e.id for e in b.events]}

    seen = await same(services, scenario)
    assert seen["stale"] == seen["from_create"] == "StaleSessionError"
    assert seen["raced"] == ["Event", "StaleSessionError"] and seen["stored"] == 4


async def test_a_session_built_by_hand_appends_only_while_storage_has_not_moved(
        services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s")
        await svc.append_event(s, text_event(1))
        # No storage marker: ADK falls back to times and the newest event.
        current = Session(id="s", app_name="app", user_id="u", last_update_time=s.last_update_time,
                          events=list(s.events))
        behind = Session(id="s", app_name="app", user_id="u", last_update_time=T0)
        return {"current": type(await outcome(svc.append_event(current, text_event(2)))).__name__,
                "behind": await outcome(svc.append_event(behind, text_event(3))),
                "stored": [e.id for e in (await svc.get_session(app_name="app", user_id="u",
                                                                session_id="s")).events]}  # type: ignore[union-attr]

    seen = await same(services, scenario)
    assert seen == {"current": "Event", "behind": "StaleSessionError", "stored": ["e1", "e2"]}


# --- events ---------------------------------------------------------------------------


def full_events() -> list[Event]:
    """Events carrying every field ADK stores, of every kind a Runner writes."""
    call = types.FunctionCall(id="c1", name="lookup", args={"q": "x", "n": 2, "f": 0.5, "nested": {"l": [1]}})
    return [
        Event(id="u1", invocation_id="i1", author="user", timestamp=T0 + 0.123456789,
              content=types.Content(role="user", parts=[
                  types.Part(text="look at this"),
                  types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\x00\xff" * 20)),
                  types.Part(file_data=types.FileData(mime_type="application/pdf", file_uri="gs://b/f.pdf"))])),
        Event(id="m1", invocation_id="i1", author="planner", branch="planner.sub", timestamp=T0 + 1,
              content=types.Content(role="model", parts=[types.Part(text="thinking", thought=True,
                                                                    thought_signature=b"sig"),
                                                         types.Part(function_call=call)]),
              long_running_tool_ids={"c1"}, turn_complete=False, model_version="m-001",
              finish_reason=types.FinishReason.STOP, avg_logprobs=-0.25,
              usage_metadata=types.GenerateContentResponseUsageMetadata(
                  prompt_token_count=100, cached_content_token_count=60, candidates_token_count=8,
                  thoughts_token_count=2, total_token_count=110),
              custom_metadata={"mine": {"a": [1, 2.5, "x"]}, "flag": True},
              grounding_metadata=types.GroundingMetadata(web_search_queries=["weather paris"]),
              citation_metadata=types.CitationMetadata(citations=[types.Citation(uri="https://e.x", start_index=1)])),
        Event(id="t1", invocation_id="i1", author="planner", timestamp=T0 + 2,
              content=types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                  id="c1", name="lookup", response={"result": {"ok": True, "rows": [[1, "a"]]}}))]),
              actions=EventActions(skip_summarization=True, state_delta={"seen": 1}, artifact_delta={"f.txt": 2})),
        Event(id="x1", invocation_id="i1", author="planner", timestamp=T0 + 3,
              actions=EventActions(transfer_to_agent="helper", escalate=True, requested_tool_confirmations={
                  "c1": ToolConfirmation(hint="delete album?", confirmed=False,
                                         payload={"album": "a1", "count": 3})})),
        Event(id="x2", invocation_id="i1", author="helper", timestamp=T0 + 4, error_code="SAFETY",
              error_message="blocked", interrupted=True,
              input_transcription=types.Transcription(text="hello", finished=True),
              output_transcription=types.Transcription(text="hi")),
        Event(id="x3", invocation_id="i1", author="helper", timestamp=T0 + 5, turn_complete=True,
              content=types.Content(role="model", parts=[types.Part(text=""),
                                                         types.Part(executable_code=types.ExecutableCode(
                                                             code="print(1)", language=types.Language.PYTHON))]),
              actions=EventActions(end_of_agent=True, agent_state={"step": 2})),
        Event(id="x4", invocation_id="i2", author="weird author\twith tab", timestamp=T0 + 6,
              content=types.Content(role="tool", parts=[types.Part(text="tool text")])),
        Event(id="x5", invocation_id="i2", author="agent", timestamp=T0 + 7, partial=False,
              content=types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                  name="no_id", args={}))])),
    ]


async def test_every_event_field_round_trips(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s")
        returned = [event_dump(await svc.append_event(s, e)) for e in full_events()]
        partial = await svc.append_event(s, Event(id="p", author="agent", partial=True, timestamp=T0 + 8,
                                                  content=types.Content(role="model", parts=[types.Part(text="..")])))
        got = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        return {"returned": returned, "partial_returned": partial.id, "in_memory": [event_dump(e) for e in s.events],
                "stored": [event_dump(e) for e in got.events], "equal_objects": got.events == s.events}

    seen = await same(services, scenario)
    assert [e["id"] for e in seen["stored"]] == [e.id for e in full_events()]
    assert seen["stored"] == seen["in_memory"] and seen["equal_objects"]


async def test_update_times_follow_appends(services: dict[str, BaseSessionService]) -> None:
    async def scenario(svc: BaseSessionService) -> Any:
        s = await svc.create_session(app_name="app", user_id="u", session_id="s")
        created = s.last_update_time
        event = Event(id="n", invocation_id="i", author="user")
        await svc.append_event(s, event)
        got = await svc.get_session(app_name="app", user_id="u", session_id="s")
        listed = (await svc.list_sessions(app_name="app", user_id="u")).sessions[0]
        assert got is not None
        # A Runner's events are stamped just before they are appended: the
        # update time is the event's (ADK) or the commit's (agentctx), a
        # moment later, never earlier.
        def near(t: float) -> bool:  # a loaded machine may take a while to commit
            return abs(t - event.timestamp) < 2.0

        return {"moved": s.last_update_time > created, "in_memory": near(s.last_update_time),
                "read": near(got.last_update_time), "listed": near(listed.last_update_time),
                "read_as_in_memory": round(got.last_update_time, 6) == round(s.last_update_time, 6)}

    assert await same(services, scenario) == {"moved": True, "in_memory": True, "read": True, "listed": True,
                                              "read_as_in_memory": True}


async def test_known_difference_an_event_from_the_past_does_not_move_the_update_time_back(
        services: dict[str, BaseSessionService]) -> None:
    """Documented (README, ADK): ADK sets a session's update time to the
    appended event's timestamp, even one in the past (a replayed session);
    agentctx to the commit time, or the event's when that is later."""
    seen = {}
    for name, svc in services.items():
        s = await svc.create_session(app_name="app", user_id="u", session_id="s")
        created = s.last_update_time
        await svc.append_event(s, text_event(1))  # T0 + 1: before the session was created
        got = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        seen[name] = (s.last_update_time >= created, got.last_update_time >= created,
                      round(got.last_update_time, 6) == round(T0 + 1, 6))
    assert seen == {"adk": (False, False, True), "agentctx": (True, True, False)}


async def test_events_read_by_another_service_instance(services: dict[str, BaseSessionService],
                                                       tmp_path: pathlib.Path) -> None:
    """A second instance on the same storage (another process of the app)
    reads what the first appended, including after it read once."""
    ours = services["agentctx"]
    assert isinstance(ours, AgentCtxSessionService)
    twins = {"agentctx": AgentCtxSessionService(ours.client, app_prefix=ours.app_prefix,
                                                cached_sessions=ours._cache.max_sessions,
                                                cached_bytes=ours._cache.max_bytes),
             "adk": DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.sqlite'}")}

    async def scenario_for(name: str) -> Scenario:
        async def scenario(svc: BaseSessionService) -> Any:
            twin = twins[name]
            s = await svc.create_session(app_name="app", user_id="u", session_id="s")
            await svc.append_event(s, text_event(1))
            first = await twin.get_session(app_name="app", user_id="u", session_id="s")
            for i in range(2, 5):
                await svc.append_event(s, text_event(i, "agent"))
            second = await twin.get_session(app_name="app", user_id="u", session_id="s")
            assert first is not None and second is not None
            await twin.append_event(second, text_event(5))
            third = await svc.get_session(app_name="app", user_id="u", session_id="s")
            await svc.delete_session(app_name="app", user_id="u", session_id="s")
            await svc.create_session(app_name="app", user_id="u", session_id="s")
            fourth = await twin.get_session(app_name="app", user_id="u", session_id="s")
            return [[e.id for e in x.events] for x in (first, second, third, fourth) if x is not None]
        return scenario

    try:
        seen = {name: await (await scenario_for(name))(svc) for name, svc in services.items()}
    finally:
        await twins["adk"].close()  # type: ignore[attr-defined]
    # ``second`` took e5 in memory when the twin appended it.
    e1_5 = ["e1", "e2", "e3", "e4", "e5"]
    assert seen["agentctx"] == seen["adk"] == [["e1"], e1_5, e1_5, []]


async def test_known_difference_events_read_in_append_order(services: dict[str, BaseSessionService]) -> None:
    """Documented (README, ADK): agentctx returns events in the order they
    were appended; ADK's database orders them by timestamp (then id), so an
    event appended with an earlier timestamp moves up."""
    seen = {}
    for name, svc in services.items():
        s = await svc.create_session(app_name="app", user_id="u", session_id="s")
        for i in (3, 1, 2):
            await svc.append_event(s, text_event(i))
        got = await svc.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        seen[name] = [e.id for e in got.events]
    assert seen == {"agentctx": ["e3", "e1", "e2"], "adk": ["e1", "e2", "e3"]}
