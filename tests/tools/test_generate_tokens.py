"""Generate and StreamGenerate mint one tool token per function call of the
stored reply, with the session's declared capabilities; a retried turn
mints fresh tokens for its stored reply; TURN_STORAGE_NONE mints none. The
tool's effects reach the next turn's request with the response."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2, tool_context_pb2, tool_context_pb2_grpc
from agentctx.type.v1 import content_pb2
from tests.support.pair import pair_maker
from tests.tools.conftest import KEYS, with_token
from tests.turns.builders import Agent, calls_of

TOOL = "lookup"


@pytest.fixture
async def pair_factory(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    async with pair_maker(certs_dir, tmp_path, context_defaults={"tool_token_keys": KEYS}) as make:
        yield make


async def _session(stub: Any, capabilities: list[str]) -> str:
    config = policy_pb2.ContextConfig(tools=[policy_pb2.ToolDeclaration(name=TOOL, capabilities=capabilities)])
    created = await stub.CreateSession(pb.CreateSessionRequest(parent="apps/app/users/u1",
                                                               session=session_pb2.Session(config=config)))
    return created.name


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_with_calls_carries_one_token_per_call(pair_factory: Callable[..., Any], stream: bool) -> None:
    pair = await pair_factory()
    session = await _session(pair.stub, ["state_write", "artifact_attach", "artifact_put", "artifact_get"])
    agent = Agent(pair.stub, session, stream=stream)
    first = await agent.send(agent.request(f"Please call {TOOL} for the ferry."))
    (call,) = calls_of(first.reply)
    (token,) = first.tool_tokens
    assert (token.function_call_id, token.tool) == (call.id, TOOL)
    assert list(token.capabilities) == ["identity", "state_write", "artifact_put", "artifact_get", "artifact_attach"]
    assert token.token not in str(first.reply)

    tool = tool_context_pb2_grpc.ToolContextServiceStub(pair.channel)
    meta = with_token(token.token)
    await tool.UpdateToolState(tool_context_pb2.UpdateToolStateRequest(
        state_delta=session_pb2.StateDelta(session={"ferry": "07:10"})), metadata=meta)

    async def note():  # type: ignore[no-untyped-def]
        yield tool_context_pb2.SaveToolArtifactRequest(header=tool_context_pb2.SaveToolArtifactHeader(
            artifact="timetable.txt", part=content_pb2.Part(text="ferry 07:10 from pier 3")))

    await tool.SaveToolArtifact(note(), metadata=meta)
    await tool.AttachToolArtifact(tool_context_pb2.AttachToolArtifactRequest(artifact="timetable.txt"),
                                  metadata=meta)
    # The agent answers the call: the next turn's request holds the attachment, the state holds the delta.
    agent.pending = [call]
    agent.turns += 1
    second = await agent.send(agent.request())
    assert not second.tool_tokens
    built = await pair.stub.BuildContext(pb.BuildContextRequest(session=session))
    texts = [p.text for c in built.request.contents for p in c.parts if p.text]
    assert "ferry 07:10 from pier 3" in texts
    got = await pair.stub.GetSession(pb.GetSessionRequest(name=session))
    assert got.state["ferry"] == "07:10"


async def test_a_retried_turn_gets_fresh_tokens_and_storage_none_gets_none(pair_factory: Callable[..., Any]) -> None:
    pair = await pair_factory()
    session = await _session(pair.stub, ["state_read"])
    agent = Agent(pair.stub, session)
    request = agent.request(f"Please call {TOOL} now.")
    first = await agent.send(request)
    again = await agent.send(request)
    assert again.deduplicated and len(again.tool_tokens) == 1
    assert again.tool_tokens[0].token != first.tool_tokens[0].token
    tool = tool_context_pb2_grpc.ToolContextServiceStub(pair.channel)
    for token in (first.tool_tokens[0], again.tool_tokens[0]):
        await tool.GetToolState(tool_context_pb2.GetToolStateRequest(), metadata=with_token(token.token))

    scratch = await _session(pair.stub, ["state_read"])
    none = Agent(pair.stub, scratch)
    unstored = await none.send(none.request(f"Please call {TOOL} now.", storage=pb.TURN_STORAGE_NONE))
    assert calls_of(unstored.reply) and not unstored.tool_tokens
