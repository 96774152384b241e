"""Overflow recovery: the provider's context-window overflow compacts the
session and retries once; a second overflow, or a session whose compaction
is off, is a clear error that loses nothing."""

from __future__ import annotations

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.status import error_from_rpc
from tests.turns.builders import Agent, create_session, pairing_violations

WINDOW = 1500
# About 100 tokens a turn: the window holds a dozen turns.
WORDY = "Tell me more about the old harbour district and its history. " * 6


def _compaction(enabled: bool) -> policy_pb2.CompactionPolicy:
    # No context_window: threshold compaction never runs, so only the
    # provider's overflow can trigger a compaction here.
    return policy_pb2.CompactionPolicy(enabled=enabled, keep_recent_tokens=300)


@pytest.fixture
async def small_window(pair_factory):
    return await pair_factory(cache={"local_context_window": WINDOW})


async def _fill(agent: Agent, turns: int) -> None:
    for i in range(turns):
        await agent.turn(f"{i}: {WORDY}")


@pytest.mark.parametrize("stream", [False, True])
async def test_overflow_compacts_and_retries_once(small_window, stream: bool) -> None:
    pair = small_window
    session = await create_session(pair.stub, compaction=_compaction(True))
    agent = Agent(pair.stub, session.name, stream=stream)
    op = "stream" if stream else "generate"
    recovered = None
    for i in range(40):
        calls = pair.provider.counts[op]
        response = await agent.turn(f"{i}: {WORDY}" if i % 4 else "Please call lookup for the harbour opening hours.")
        if response.compactions:
            recovered = response
            assert pair.provider.counts[op] == calls + 2, "one failed call, one retry"
            break
        assert pair.provider.counts[op] == calls + 1
    assert recovered is not None, "the conversation never overflowed"
    compaction = recovered.compactions[0]
    assert compaction.kind == event_pb2.EVENT_KIND_COMPACTION
    assert compaction.compaction.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_OVERFLOW
    assert recovered.reply.sequence > compaction.sequence
    assert recovered.accounting.compaction_sequence == compaction.sequence
    assert recovered.reply.usage.prompt_tokens <= WINDOW
    # The conversation goes on, tool pairing intact.
    for _ in range(3):
        await agent.turn("Please call lookup for the ferry times." if not agent.pending else "")
    built = await pair.stub.BuildContext(pb.BuildContextRequest(
        session=session.name, input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="more")])],
    ))
    assert pairing_violations(built.request.contents) == []


async def test_a_second_overflow_is_a_clear_error_and_loses_nothing(small_window) -> None:
    pair = small_window
    session = await create_session(pair.stub, compaction=_compaction(True))
    agent = Agent(pair.stub, session.name)
    await _fill(agent, 6)
    # An instruction that alone nearly fills the window: no compaction of
    # the history can make the request fit.
    huge = content_pb2.Content(role="user", parts=[content_pb2.Part(text="Rule: be exact. " * (WINDOW // 4))])
    request = agent.request(WORDY)
    request.system_instruction.CopyFrom(huge)
    calls = pair.provider.counts["generate"]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await agent.send(request)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    err = error_from_rpc(info.value)
    assert err.reason == "CONTEXT_WINDOW_EXCEEDED_AFTER_COMPACTION"
    assert int(err.metadata["context_window"]) == WINDOW
    assert int(err.metadata["prompt_tokens"]) > WINDOW and int(err.metadata["prompt_tokens_before"]) > WINDOW
    assert pair.provider.counts["generate"] == calls + 2, "exactly one retry"
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=session.name, include_compactions=True))).events
    assert events[-1].kind == event_pb2.EVENT_KIND_COMPACTION, "the compaction stays committed"
    assert int(err.metadata["compaction_sequence"]) == events[-1].sequence
    assert events[-2].id == request.input[0].id, "the input is stored, no reply"


async def test_overflow_with_compaction_off_surfaces_without_compacting(small_window) -> None:
    pair = small_window
    session = await create_session(pair.stub, compaction=_compaction(False))
    agent = Agent(pair.stub, session.name)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _fill(agent, 40)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    err = error_from_rpc(info.value)
    assert err.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert err.metadata["compaction"] == "DISABLED"
    assert int(err.metadata["prompt_tokens"]) > int(err.metadata["context_window"]) == WINDOW
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(
        parent=session.name, include_compactions=True, page_size=1000,
    ))).events
    assert all(e.kind == event_pb2.EVENT_KIND_MESSAGE for e in events)
    assert events[-1].id == f"agent-{agent.turns}", "the failed turn's input is stored"
