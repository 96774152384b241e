"""AgentCtxSession under the OpenAI Agents SDK, run in the SDK's venv by
test_openai_agents.py against a pair that test starts: every item kind
round-trips byte for byte, pop retracts without deleting, and a Runner
agent with a tool gives the same items on AgentCtxSession as on the SDK's
own SQLiteSession over several turns. Written for this repository."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentctx_openai_agents import AgentCtxCompactionSession, AgentCtxModel, AgentCtxModelProvider, AgentCtxSession
from agents import Agent, ModelResponse, RunConfig, Runner, SQLiteSession, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import agentctx_client
from agentctx.context.v1 import policy_pb2

_ids = itertools.count()
RUN = os.environ["AGENTCTX_OA_RUN"]

# One of each item kind the SDK writes into a session (Responses input items).
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Plan a trip to Lyon"},
    {"type": "message", "role": "system", "content": "You are careful."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Prefer trains."}]},
    {"role": "user", "content": [
        {"type": "input_text", "text": "and this map"},
        {"type": "input_image", "image_url": "https://example.invalid/map.png", "detail": "auto"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
        {"type": "input_file", "filename": "notes.pdf", "file_data": "data:application/pdf;base64,JVBERi0="},
    ]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think about trains"}],
     "encrypted_content": "gAAAA=="},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\":\"Lyon\",\"days\":3,\"ratio\":1.0,\"nested\":{\"z\":1,\"a\":[1,2.5,null]}}",
     "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "{\"forecast\":\"sunny\",\"high\":21}"},
    {"type": "function_call", "call_id": "call_2", "name": "transfer_to_booking", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_2",
     "output": [{"type": "input_text", "text": "{\"assistant\": \"booking\"}"}]},
    {"type": "function_call", "call_id": "call_3", "name": "bad name!", "arguments": "not json"},
    {"type": "function_call_output", "call_id": "call_3", "output": "refused"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
        {"type": "output_text", "text": "Sunny in Lyon. ünïcödé \u2028 \"quoted\"", "annotations": [
            {"type": "url_citation", "url": "https://example.invalid", "title": "w", "start_index": 0,
             "end_index": 5}], "logprobs": []},
        {"type": "refusal", "refusal": "I can't book flights."},
    ]},
    {"type": "file_search_call", "id": "fs_1", "queries": ["lyon"], "status": "completed", "results": None},
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "lyon weather"}},
    {"type": "computer_call", "id": "cc_1", "call_id": "ccall_1", "status": "completed",
     "action": {"type": "click", "button": "left", "x": 10, "y": 20}, "pending_safety_checks": []},
    {"type": "computer_call_output", "call_id": "ccall_1",
     "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}},
    {"type": "local_shell_call", "id": "ls_1", "call_id": "lcall_1", "status": "completed",
     "action": {"type": "exec", "command": ["ls", "-la"], "env": {}}},
    {"type": "local_shell_call_output", "id": "lso_1", "output": "total 0"},
    {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "lookup", "arguments": "{\"q\":1}",
     "output": "ok"},
    {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBORw0KGgo="},
    {"type": "code_interpreter_call", "id": "ci_1", "code": "print(1)", "container_id": "c1",
     "status": "completed", "outputs": [{"type": "logs", "logs": "1"}]},
    {"type": "custom_tool_call", "call_id": "ct_1", "name": "grammar", "input": "x = 1"},
    {"type": "custom_tool_call_output", "call_id": "ct_1", "output": "parsed"},
    {"type": "item_reference", "id": "msg_0"},
    {"type": "compaction", "encrypted_content": "opaque"},
    {"role": "user", "content": "", "z": 1, "a": 2},
]


def _bytes(items: list[Any]) -> list[str]:
    return [json.dumps(i) for i in items]


@pytest.fixture
async def client() -> AsyncIterator[agentctx_client.ContextClient]:
    tls = agentctx_client.TlsConfig(ca=os.environ["AGENTCTX_OA_CA"], server_name="localhost")
    async with agentctx_client.connect(os.environ["AGENTCTX_OA_TARGET"], tls=tls) as c:
        yield c


def _session(client: agentctx_client.ContextClient, cls: type[AgentCtxSession] = AgentCtxSession,
             **kw: Any) -> AgentCtxSession:
    return cls(f"s{next(_ids)}", client, app=f"{RUN}.oa", user="u1", **kw)


async def test_every_item_kind_round_trips_byte_for_byte(client: agentctx_client.ContextClient) -> None:
    session = _session(client)
    await session.add_items(ITEMS[:5])
    await session.add_items(ITEMS[5:])
    assert _bytes(await session.get_items()) == _bytes(ITEMS)
    # Another process (a fresh session object) reads the same bytes.
    other = AgentCtxSession(session.session_id, client, app=session.app, user="u1")
    assert _bytes(await other.get_items()) == _bytes(ITEMS)
    assert _bytes(await other.get_items(limit=3)) == _bytes(ITEMS[-3:])
    assert await other.get_items(limit=0) == []


async def test_a_model_sees_the_conversation_it_can_read(client: agentctx_client.ContextClient) -> None:
    session = _session(client)
    await session.add_items(ITEMS)
    built = await client.build_context(session.name)
    parts = [p for c in built.contents for p in c.parts]
    texts = [p.text for p in parts if p.text]
    assert "Plan a trip to Lyon" in texts and "Prefer trains." in texts
    assert "[image: https://example.invalid/map.png]" in texts and "[image]" in texts
    calls = {p.function_call.id: p.function_call for p in parts if p.function_call}
    answers = {p.function_response.id: p.function_response for p in parts if p.function_response}
    assert calls["call_1"].name == "get_weather" and calls["call_1"].args["city"] == "Lyon"
    assert answers["call_1"].name == "get_weather"
    assert answers["call_2"].response == {"output": "{\"assistant\": \"booking\"}"}
    # A name the context service refuses is kept as an item only, with its output.
    assert "call_3" not in calls and "call_3" not in answers
    assert not any("encrypted" in (t or "") or "gAAAA" in (t or "") for t in texts)


async def test_pop_retracts_and_keeps_every_event(client: agentctx_client.ContextClient) -> None:
    session = _session(client)
    assert await session.pop_item() is None
    await session.add_items(ITEMS[:3])
    assert json.dumps(await session.pop_item()) == json.dumps(ITEMS[2])
    assert _bytes(await session.get_items()) == _bytes(ITEMS[:2])
    other = AgentCtxSession(session.session_id, client, app=session.app, user="u1")
    assert _bytes(await other.get_items()) == _bytes(ITEMS[:2])
    assert json.dumps(await other.pop_item()) == json.dumps(ITEMS[1])
    assert _bytes(await session.get_items()) == _bytes(ITEMS[:1])
    events = [e async for e in client.iter_events(session.name)]
    assert len(events) == 5  # three items, two retractions: nothing deleted
    assert [e.retracts_event_id for e in events[3:]] == [events[2].id, events[1].id]
    # The context service's builds leave the retracted items out as get_items does.
    texts = [p.text for c in (await client.build_context(session.name)).contents for p in c.parts if p.text]
    assert texts == ["Plan a trip to Lyon"]
    await session.add_items(ITEMS[3:4])
    assert _bytes(await session.get_items()) == _bytes([ITEMS[0], ITEMS[3]])
    await session.clear_session()
    assert await session.get_items() == []
    assert await other.get_items() == []
    await session.add_items(ITEMS[:1])
    assert _bytes(await other.get_items()) == _bytes(ITEMS[:1])
    # Deleted and created again with more events than a reader saw: the
    # reader notices the other session and reads it whole.
    await session.add_items(ITEMS[1:2])
    assert _bytes(await other.get_items()) == _bytes(ITEMS[:2])
    await session.clear_session()
    await session.add_items(ITEMS[5:8])
    assert _bytes(await other.get_items()) == _bytes(ITEMS[5:8])


class ScriptedModel(Model):
    """Replies from a script, the same on every session: a weather call
    for each user turn, then a text answer naming the tool's result."""

    def __init__(self) -> None:
        self.calls = 0
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, *, previous_response_id: Any,
                           conversation_id: Any, prompt: Any) -> ModelResponse:
        self.calls += 1
        self.inputs.append(list(input) if isinstance(input, list) else [input])
        last = self.inputs[-1][-1]
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            text = f"It is {json.loads(last['output'])['forecast']} (turn {self.calls})."
            output: list[Any] = [ResponseOutputMessage(
                id=f"msg_{self.calls}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]
        else:
            output = [ResponseFunctionToolCall(id=f"fc_{self.calls}", type="function_call",
                                               call_id=f"call_{self.calls}", name="get_weather",
                                               arguments=json.dumps({"city": "Lyon", "turn": self.calls}))]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def get_weather(city: str, turn: int) -> str:
    """Current weather for a city."""
    return json.dumps({"city": city, "forecast": "sunny", "turn": turn})


async def _run(session: Any) -> tuple[list[Any], list[list[Any]]]:
    model = ScriptedModel()
    agent = Agent(name="planner", instructions="Be brief.", model=model, tools=[get_weather])
    for text in ("Weather in Lyon?", "And tomorrow?", "Thanks, and the day after?"):
        result = await Runner.run(agent, text, session=session)
        assert result.final_output
    return await session.get_items(), model.inputs


async def test_runner_gives_the_same_items_as_sqlite_session(client: agentctx_client.ContextClient,
                                                             tmp_path: Any) -> None:
    theirs, their_inputs = await _run(SQLiteSession("parity", str(tmp_path / "s.db")))
    ours, our_inputs = await _run(_session(client))
    assert _bytes(ours) == _bytes(theirs)
    assert [_bytes(i) for i in our_inputs] == [_bytes(i) for i in their_inputs]
    assert len(ours) == 12  # 3 turns of user, call, output, answer


async def test_compaction_session_summarizes_and_loses_nothing(client: agentctx_client.ContextClient) -> None:
    config = policy_pb2.ContextConfig(compaction=policy_pb2.CompactionPolicy(
        enabled=True, keep_recent_tokens=24, retain_recent_exchanges=1))
    session = _session(client, AgentCtxCompactionSession, compact_after_items=4, config=config)
    assert isinstance(session, AgentCtxCompactionSession)
    await session.add_items(ITEMS[:3])
    await session.run_compaction()
    assert _bytes(await session.get_items()) == _bytes(ITEMS[:3])  # below the threshold
    await session.add_items(ITEMS[3:12])
    await session.run_compaction({"force": True})
    items = await session.get_items()
    assert items[0]["role"] == "developer" and items[0]["content"][0]["text"]
    assert len(items) < 13
    tail = [json.dumps(i) for i in items[1:]]
    assert tail == _bytes(ITEMS[12 - len(tail):12])
    plain = AgentCtxSession(session.session_id, client, app=session.app, user="u1")
    assert _bytes(await plain.get_items()) == _bytes(ITEMS[:12])  # every item still stored


@function_tool
def lookup(query: str) -> str:
    """Looks a query up."""
    return json.dumps({"query": query, "answer": 42})


async def test_model_calls_go_through_the_cache_tier(client: agentctx_client.ContextClient) -> None:
    """AgentCtxModel under the Runner: the tool call and the answer come from
    the cache tier's model (the local simulator), usage comes back, and the
    stable prefix gets cached; the agent holds no provider key."""
    provider = AgentCtxModelProvider(client, app=f"{RUN}.oa", user="u2", default_model="local-sim-1")
    agent = Agent(name="researcher", instructions="You look things up. " * 40, tools=[lookup])
    session = _session(client)
    states = []
    usage_in = 0
    for i in range(4):
        if i % 2:
            streamed = Runner.run_streamed(agent, f"Please call lookup for item {i}.", session=session,
                                           run_config=RunConfig(model_provider=provider))
            async for _ in streamed.stream_events():
                pass
            result: Any = streamed
        else:
            result = await Runner.run(agent, f"Please call lookup for item {i}.", session=session,
                               run_config=RunConfig(model_provider=provider))
        assert str(result.final_output).startswith("local-sim used the result of lookup")
        usage_in += result.context_wrapper.usage.input_tokens
        model = provider.get_model(None)
        assert isinstance(model, AgentCtxModel)
        states.append(model.last_cache.state)
    items = await session.get_items()
    assert [i.get("type", "message") for i in items[:4]] == ["message", "function_call", "function_call_output",
                                                            "message"]
    assert len(items) == 16 and usage_in > 0
    assert {1, 2, 3} & set(states), states  # CREATED, HIT or GROWN: the prefix was cached
