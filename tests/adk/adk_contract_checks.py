"""AgentCtxSessionService against the behaviours ADK's current session
contract documents (state scopes, get_user_state, stale writers, update
times, listing); run in the ADK venv by test_adk_contract.py. Written for
this repository; adk_parity_checks.py holds the differential scenarios."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import AsyncIterator

import pytest
from agentctx_adk import AgentCtxSessionService
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event, EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agentctx_client import TlsConfig

_runs = itertools.count()


@pytest.fixture
async def service() -> AsyncIterator[AgentCtxSessionService]:
    async with AgentCtxSessionService.connect(
        os.environ["AGENTCTX_ADK_TARGET"], tls=TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost"),
        app_prefix=f"{os.environ['AGENTCTX_ADK_RUN']}.{next(_runs)}.",
    ) as service:
        yield service


def delta_event(delta: dict, **kwargs) -> Event:  # type: ignore[type-arg, no-untyped-def]
    return Event(invocation_id="inv", author="user", actions=EventActions(state_delta=delta), **kwargs)


async def test_state_scopes_are_shared_as_adk_shares_them(service: AgentCtxSessionService) -> None:
    s1 = await service.create_session(app_name="app", user_id="u1", session_id="s1",
                                      state={"app:k1": "v1", "user:k1": 1, "sk": "a", "temp:t": "x"})
    assert s1.state == {"app:k1": "v1", "user:k1": 1, "sk": "a"}
    await service.append_event(s1, delta_event({"app:k2": "v2", "user:k2": {"n": 2}, "sk2": "b", "temp:t2": "y"}))
    assert s1.state["temp:t2"] == "y"  # temp state lives in memory for the invocation
    other_user = await service.create_session(app_name="app", user_id="u2", session_id="s2")
    assert other_user.state == {"app:k1": "v1", "app:k2": "v2"}
    same_user = await service.create_session(app_name="app", user_id="u1", session_id="s3")
    assert same_user.state == {"app:k1": "v1", "app:k2": "v2", "user:k1": 1, "user:k2": {"n": 2}}
    got = await service.get_session(app_name="app", user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"app:k1": "v1", "app:k2": "v2", "user:k1": 1, "user:k2": {"n": 2}, "sk": "a", "sk2": "b"}
    assert isinstance(got.state["user:k1"], int)
    assert "temp:t2" not in got.events[0].actions.state_delta
    assert await service.get_user_state(app_name="app", user_id="u1") == {"k1": 1, "k2": {"n": 2}}
    assert await service.get_user_state(app_name="app", user_id="nobody") == {}
    listed = await service.list_sessions(app_name="app")
    assert {s.id: s.user_id for s in listed.sessions} == {"s1": "u1", "s2": "u2", "s3": "u1"}
    assert next(s for s in listed.sessions if s.id == "s2").state == {"app:k1": "v1", "app:k2": "v2"}


async def test_stale_sessions_are_refused_and_one_concurrent_writer_wins(service: AgentCtxSessionService) -> None:
    session = await service.create_session(app_name="app", user_id="u")
    for i in range(4):
        latest = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert latest is not None
        a, b = latest.model_copy(deep=True), latest.model_copy(deep=True)
        results = await asyncio.gather(service.append_event(a, delta_event({f"a{i}": 1})),
                                       service.append_event(b, delta_event({f"b{i}": 1})), return_exceptions=True)
        errors = [r for r in results if isinstance(r, Exception)]
        assert len(errors) == 1 and isinstance(errors[0], StaleSessionError), results
        assert "modified in storage" in str(errors[0])
    final = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert final is not None and len(final.events) == 4
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name="app", user_id="u", session_id=session.id)


async def test_update_times_and_event_filters(service: AgentCtxSessionService) -> None:
    session = await service.create_session(app_name="app", user_id="u")
    future = session.last_update_time + 10
    await service.append_event(session, Event(invocation_id="i", author="user", timestamp=future))
    assert session.last_update_time == pytest.approx(future, abs=1e-6)
    got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert got is not None and got.last_update_time == pytest.approx(future, abs=1e-6)
    other = await service.create_session(app_name="app", user_id="u")
    for i in range(1, 6):
        await service.append_event(other, Event(author="user", timestamp=i))
    recent = await service.get_session(app_name="app", user_id="u", session_id=other.id,
                                       config=GetSessionConfig(num_recent_events=3))
    assert recent is not None and [e.timestamp for e in recent.events] == [3, 4, 5]
    after = await service.get_session(app_name="app", user_id="u", session_id=other.id,
                                      config=GetSessionConfig(after_timestamp=4.0, num_recent_events=3))
    assert after is not None and [e.timestamp for e in after.events] == [4, 5]
    none = await service.get_session(app_name="app", user_id="u", session_id=other.id,
                                     config=GetSessionConfig(num_recent_events=0))
    assert none is not None and none.events == []
    # Oldest update first: `session` was updated 10 s in the future.
    listed = await service.list_sessions(app_name="app", user_id="u")
    assert [s.id for s in listed.sessions] == [other.id, session.id]


async def test_events_round_trip_with_tool_calls_and_action_only_events(service: AgentCtxSessionService) -> None:
    session = await service.create_session(app_name="app", user_id="u")
    call = Event(invocation_id="i", author="agent", long_running_tool_ids={"c1"}, content=types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(id="c1", name="lookup", args={"n": 3}))]))
    answer = Event(invocation_id="i", author="user", content=types.Content(
        role="user", parts=[types.Part(function_response=types.FunctionResponse(id="c1", name="lookup",
                                                                             response={"ok": [1, 2.5]}))]))
    odd = Event(invocation_id="i", author="agent", content=types.Content(role="model", parts=[
        types.Part(text=""), types.Part(executable_code=types.ExecutableCode(code="1+1", language="PYTHON"))]))
    marker = Event(invocation_id="i", author="agent", actions=EventActions(end_of_agent=True, transfer_to_agent="b"))
    for event in (call, answer, odd, marker):
        await service.append_event(session, event)
    got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert got is not None
    assert got.events == session.events
    assert got.events[0].content.parts[0].function_call.args == {"n": 3}
    assert isinstance(got.events[0].content.parts[0].function_call.args["n"], int)


# A reader in a process of its own: prints, one line per event, the JSON
# ADK builds a prompt from (model_dump_json keeps dict order).
_READER = """
import asyncio, os, sys
from agentctx_adk import AgentCtxSessionService
from agentctx_client import TlsConfig

async def main():
    async with AgentCtxSessionService.connect(
            os.environ["AGENTCTX_ADK_TARGET"],
            tls=TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost"),
            app_prefix=sys.argv[1]) as service:
        got = await service.get_session(app_name="app", user_id="u", session_id=sys.argv[2])
        print(got.model_dump_json(include={"state"}))
        for event in got.events:
            print(event.model_dump_json(exclude={"timestamp"}))

asyncio.run(main())
"""


async def _read_in_another_process(service: AgentCtxSessionService, session_id: str, seed: str) -> list[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _READER, service.app_prefix, session_id, env={**os.environ, "PYTHONHASHSEED": seed},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    return out.decode().splitlines()


async def test_json_objects_keep_one_key_order_in_every_process(service: AgentCtxSessionService) -> None:
    """Tool arguments, tool results and state go through protobuf's Struct,
    a map whose order follows each process's hash seed: every process must
    still see one order, the same as the appending process keeps, so the
    prompt ADK builds from the session has the same bytes everywhere."""
    args = {"zeta": 1, "alpha": {"y": [{"q": 1, "b": 2}], "x": 2}, "mid": "m", "k9": 9, "k1": 1, "k5": 5}
    result = {"rows": [{"z": 1, "a": 2}], "ok": True, "count": 2, "b": None}
    session = await service.create_session(app_name="app", user_id="u", state={"s9": 1, "s1": {"d": 1, "c": 2}})
    call = Event(invocation_id="i", author="agent", content=types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(id="c1", name="lookup", args=args))]))
    answer = Event(invocation_id="i", author="user", actions=EventActions(state_delta={"w": 1, "b": {"z": 0, "a": 1}}),
                   content=types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                       id="c1", name="lookup", response=result))]))
    for event in (call, answer):
        await service.append_event(session, event)
    kept = [e.model_dump_json(exclude={"timestamp"}) for e in session.events]
    readers = [await _read_in_another_process(service, session.id, seed) for seed in ("1", "2", "3")]
    assert readers[0] == readers[1] == readers[2], "processes read different key orders"
    assert readers[0][1:] == kept, "the appending process keeps another order than readers see"
    again = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert again is not None
    assert [e.model_dump_json(exclude={"timestamp"}) for e in again.events] == kept
    assert again.events[0].content.parts[0].function_call.args == args  # the values, unchanged
