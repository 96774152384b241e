"""AgentCtxToolPlugin under ADK's Runner: an ADK tool's ToolContext
operations (state, artifacts, memory) go through agentctx on the call's
tool token, with the capabilities the session's config declares for the
tool; a refused operation answers the call as an error result. Run in the
ADK venv by test_adk_tool_context.py against a pair that test starts."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentctx_adk import AgentCtxLlm, AgentCtxPlugin, AgentCtxSessionService, AgentCtxToolPlugin
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.artifacts import InMemoryArtifactService
from google.adk.memory import InMemoryMemoryService
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

import agentctx_client
from agentctx.context.v1 import policy_pb2

DECLARED = [
    policy_pb2.ToolDeclaration(name="write_report", capabilities=[
        "state_read", "state_write", "artifact_put", "artifact_get", "artifact_list", "memory_add",
        "memory_search"]),
    policy_pb2.ToolDeclaration(name="peek", capabilities=["state_read", "artifact_list"]),
    policy_pb2.ToolDeclaration(name="stamp", capabilities=["artifact_put"]),
]
seen: dict[str, Any] = {}


async def write_report(query: str, tool_context: ToolContext) -> dict[str, Any]:
    """Writes a trip report for the city in the session's state."""
    city = tool_context.state["city"]
    version = await tool_context.save_artifact("report.md", types.Part(text=f"# {city}\nsunny"))
    own = await tool_context.load_artifact("report.md")
    tool_context.state["reported"] = True
    tool_context.state["user:reports"] = 1
    tool_context.state["temp:scratch"] = "never stored"
    await tool_context.add_memory(memories=[MemoryEntry(content=types.Content(
        parts=[types.Part(text=f"wrote a report on {city}")]))])
    found = await tool_context.search_memory("report")
    seen.update(city=city, tz=tool_context.state["user:tz"], own=own.text if own else None,
                artifacts=await tool_context.list_artifacts(), found=len(found.memories))
    return {"version": version, "city": city}


async def peek(query: str, tool_context: ToolContext) -> dict[str, Any]:
    """Looks at the state, then tries to save an artifact it may not save."""
    seen["peeked"] = tool_context.state.get("city")
    await tool_context.save_artifact("stolen.md", types.Part(text="no"))
    return {"ok": True}


async def stamp(query: str, tool_context: ToolContext) -> dict[str, Any]:
    """Saves without reading or writing state: ADK itself never needs state_read."""
    return {"version": await tool_context.save_artifact("stamp.txt", types.Part(text="stamped"))}


async def meddle(query: str, tool_context: ToolContext) -> dict[str, Any]:
    """Undeclared: identity only."""
    tool_context.state["temp:fine"] = 1  # invocation scratch, never stored: allowed
    tool_context.state["city"] = "Rome"
    return {"ok": True}


@pytest.fixture
async def service() -> AsyncIterator[AgentCtxSessionService]:
    config = policy_pb2.ContextConfig(model="local-sim-1", tools=DECLARED)
    tls = agentctx_client.TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost")
    async with AgentCtxSessionService.connect(os.environ["AGENTCTX_ADK_TARGET"], tls=tls, config=config,
                                              app_prefix=f"{os.environ['AGENTCTX_ADK_RUN']}.") as service:
        yield service


def _runner(service: AgentCtxSessionService, artifacts: InMemoryArtifactService,
            memory: InMemoryMemoryService) -> Runner:
    agent = LlmAgent(name="planner", model=AgentCtxLlm.for_sessions(service), instruction="Use your tools.",
                     tools=[write_report, peek, stamp, meddle])
    app = App(name="trips", root_agent=agent, plugins=[AgentCtxPlugin(service), AgentCtxToolPlugin(service)])
    # ADK's own in-memory services: a tool on its token never reaches them.
    return Runner(app=app, session_service=service, artifact_service=artifacts, memory_service=memory)


async def _turn(runner: Runner, session_id: str, text: str) -> list[Any]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [e async for e in runner.run_async(user_id="u1", session_id=session_id, new_message=message)]


def _responses(events: list[Any]) -> dict[str, dict[str, Any]]:
    return {r.name: dict(r.response or {}) for e in events for r in e.get_function_responses()}


async def test_a_tools_context_goes_through_its_token(service: AgentCtxSessionService) -> None:
    artifacts, memory = InMemoryArtifactService(), InMemoryMemoryService()
    runner = _runner(service, artifacts, memory)
    session = await service.create_session(app_name="trips", user_id="u1", state={"city": "Oslo", "user:tz": "CET"})

    events = await _turn(runner, session.id, "Please call write_report now.")

    assert _responses(events)["write_report"] == {"version": 0, "city": "Oslo"}
    assert seen["city"] == "Oslo" and seen["tz"] == "CET", "state read through the token"
    assert seen["own"] == "# Oslo\nsunny", "the tool loads its own staged save"
    assert seen["artifacts"] == ["report.md"] and seen["found"] >= 1
    # Stored by agentctx (visible once the response was appended), not by ADK's services.
    name = service.session_name("trips", "u1", session.id)
    assert (await service.client.load_artifact(name, "report.md")).text == "# Oslo\nsunny"
    assert await artifacts.list_artifact_keys(app_name="trips", user_id="u1", session_id=session.id) == []
    entries = await service.client.search_memory(service.app_prefix + "trips", "u1", "report")
    assert [(m.memory.text, m.memory.author, m.memory.session) for m in entries] == [
        ("wrote a report on Oslo", "write_report", name)]
    got = await service.get_session(app_name="trips", user_id="u1", session_id=session.id)
    assert got is not None
    assert (got.state["reported"], got.state["user:reports"], got.state["city"]) == (True, 1, "Oslo")
    assert "temp:scratch" not in got.state
    stored = await service.client.get_session(name)
    assert stored.state == {"city": "Oslo", "reported": True} and stored.user_state == {"tz": "CET", "reports": 1}
    # The token (tt1.<claims>.<mac>) rode in no stored event, nor its metadata.
    events = [e async for e in service.client.iter_events(name)]
    assert events and not [e.id for e in events if "tt1." in str(e.proto)]


async def test_what_the_declaration_lacks_is_refused_as_an_error_result(service: AgentCtxSessionService) -> None:
    runner = _runner(service, InMemoryArtifactService(), InMemoryMemoryService())
    session = await service.create_session(app_name="trips", user_id="u1", state={"city": "Oslo"})

    peeked = _responses(await _turn(runner, session.id, "Please call peek now."))["peek"]
    assert seen["peeked"] == "Oslo"
    assert (peeked["reason"], peeked["capability"], peeked["tool"]) == (
        "TOOL_CAPABILITY_MISSING", "artifact_put", "peek"), peeked
    meddled = _responses(await _turn(runner, session.id, "Please call meddle now."))["meddle"]
    assert (meddled["reason"], meddled["capability"]) == ("TOOL_CAPABILITY_MISSING", "state_write"), meddled

    assert _responses(await _turn(runner, session.id, "Please call stamp now."))["stamp"] == {"version": 0}

    name = service.session_name("trips", "u1", session.id)
    assert await service.client.list_artifacts(name) == ["stamp.txt"]
    got = await service.get_session(app_name="trips", user_id="u1", session_id=session.id)
    assert got is not None and got.state["city"] == "Oslo"
