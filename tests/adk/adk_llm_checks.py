"""AgentCtxLlm under ADK's Runner on AgentCtxSessionService; run in the
ADK venv by test_adk_llm.py against a pair that test starts."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from agentctx_adk import CACHE_METADATA_KEY, AgentCtxLlm, AgentCtxPlugin, AgentCtxSessionService
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.runners import Runner
from google.adk.tools.agent_tool import AgentTool
from google.genai import types

import agentctx_client
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2

INSTRUCTION = "You are a careful travel assistant. Answer briefly and use your tools. " * 8
calls: list[str] = []


def get_weather(city: str = "") -> dict[str, str]:
    """Current weather for a city."""
    calls.append(city)
    return {"city": city, "forecast": "sunny"}


@pytest.fixture
async def service() -> AsyncIterator[AgentCtxSessionService]:
    config = policy_pb2.ContextConfig(model="local-sim-1", cache=policy_pb2.CachePolicy(enabled=True))
    tls = agentctx_client.TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost")
    async with AgentCtxSessionService.connect(os.environ["AGENTCTX_ADK_TARGET"], tls=tls, config=config,
                                              app_prefix=f"{os.environ['AGENTCTX_ADK_RUN']}.") as service:
        yield service


async def _turn(runner: Runner, session_id: str, text: str) -> list:  # type: ignore[type-arg]
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [e async for e in runner.run_async(user_id="u1", session_id=session_id, new_message=message)]


async def test_an_agent_with_a_tool_runs_two_turns_through_agentctx(service: AgentCtxSessionService) -> None:
    agent = LlmAgent(name="planner", model=AgentCtxLlm.for_sessions(service), instruction=INSTRUCTION,
                     tools=[get_weather])
    app = App(name="trips", root_agent=agent, plugins=[AgentCtxPlugin(service)])
    runner = Runner(app=app, session_service=service)
    session = await service.create_session(app_name="trips", user_id="u1")

    first = await _turn(runner, session.id, "Please call get_weather for Paris.")
    second = await _turn(runner, session.id, "Thanks. And what should I pack for the trip?")

    def model_calls(events: list) -> list:  # type: ignore[type-arg]
        return [e for e in events if CACHE_METADATA_KEY in (e.custom_metadata or {})]

    assert [len(model_calls(first)), len(model_calls(second))] == [2, 1], "a tool call and its answer, then one"
    assert model_calls(first)[0].get_function_calls()[0].name == "get_weather"
    assert calls, "ADK ran the tool the model asked for"
    assert first[-1].content and first[-1].content.parts[0].text, "the answer after the tool's result"
    assert all(e.usage_metadata and e.usage_metadata.prompt_token_count for e in model_calls(first + second))
    records = [e.custom_metadata[CACHE_METADATA_KEY] for e in model_calls(first + second)]
    assert records[-1]["state"] in ("CREATED", "HIT", "GROWN"), records
    assert any(r["state"] in ("HIT", "GROWN") for r in records), records
    for e in model_calls(first + second):
        if e.custom_metadata[CACHE_METADATA_KEY]["state"] in ("HIT", "GROWN"):
            assert (e.usage_metadata.cached_content_token_count or 0) > 0

    # Every ADK event stored once, by the Runner; none by a model call.
    name = service.session_name("trips", "u1", session.id)
    stored = (await service.client._call(service.client.stub.ListEvents,
                                         pb.ListEventsRequest(parent=name, page_size=1000), None)).events
    assert [e.id for e in stored] == [e.id for e in (await service.get_session(
        app_name="trips", user_id="u1", session_id=session.id)).events]
    assert len({e.id for e in stored}) == len(stored) == len(first) + len(second) + 2  # and the two user messages
    assert not [e for e in stored if e.id.startswith("reply-")]


async def test_a_model_without_the_plugin_says_what_is_missing(service: AgentCtxSessionService) -> None:
    agent = LlmAgent(name="planner", model=AgentCtxLlm.for_sessions(service), instruction="Hi.")
    runner = Runner(app_name="trips", agent=agent, session_service=service)
    session = await service.create_session(app_name="trips", user_id="u1")
    with pytest.raises(ValueError, match="AgentCtxPlugin"):
        await _turn(runner, session.id, "Hello.")


async def test_an_agent_tool_runs_its_agentctx_model_in_the_scratch_session(service: AgentCtxSessionService) -> None:
    """AgentTool runs its agent in a session of ADK's memory, which agentctx
    does not know: that agent's calls send their own contents, in the
    scratch session, and still go through agentctx's cache tier."""
    calls.clear()
    model = AgentCtxLlm.for_sessions(service)
    child = LlmAgent(name="weather_agent", model=model, instruction=INSTRUCTION, tools=[get_weather])
    parent = LlmAgent(name="planner", model=model, instruction=INSTRUCTION, tools=[AgentTool(agent=child)])
    runner = Runner(app=App(name="trips", root_agent=parent, plugins=[AgentCtxPlugin(service)]),
                    session_service=service)
    session = await service.create_session(app_name="trips", user_id="u1")

    events = await _turn(runner, session.id, "Please ask weather_agent to call get_weather for Paris.")

    assert calls, "the child agent's model asked for get_weather and ADK ran it"
    answer = events[-1].content.parts[0].text
    assert answer == "local-sim used the result of weather_agent", answer
    responses = [r for e in events for r in e.get_function_responses()]
    assert [r.name for r in responses] == ["weather_agent"]
    assert "get_weather" in str(responses[0].response), "the child's answer came back to the planner"
    scratch = await service.scratch_session("trips", "u1")
    stored = (await service.client._call(service.client.stub.ListEvents,
                                         pb.ListEventsRequest(parent=scratch, page_size=10), None)).events
    assert not stored, "a scratch call stores nothing"


async def test_adks_compaction_summarizes_through_agentctx(service: AgentCtxSessionService) -> None:
    """ADK's sliding-window compaction calls its summarizer's model after
    the invocation, outside any plugin callback: an AgentCtxLlm summarizer
    runs in the invocation's scratch session."""
    summarizer = LlmEventSummarizer(llm=AgentCtxLlm.for_sessions(service))
    agent = LlmAgent(name="planner", model=AgentCtxLlm.for_sessions(service), instruction=INSTRUCTION)
    app = App(name="trips", root_agent=agent, plugins=[AgentCtxPlugin(service)],
              events_compaction_config=EventsCompactionConfig(compaction_interval=2, overlap_size=0,
                                                              summarizer=summarizer))
    runner = Runner(app=app, session_service=service)
    session = await service.create_session(app_name="trips", user_id="u1")
    for text in ("Hello there.", "Tell me more.", "And then?"):
        await _turn(runner, session.id, text)

    got = await service.get_session(app_name="trips", user_id="u1", session_id=session.id)
    assert got is not None
    compactions = [e.actions.compaction for e in got.events if e.actions and e.actions.compaction]
    assert compactions, [e.author for e in got.events]
    summary = compactions[0].compacted_content.parts[0].text
    assert summary and summary.startswith("local-sim reply"), summary
