"""Overflow recovery through real processes: the simulator's context
window overflows, the session is compacted and the turn retried once; an
overflow that compaction cannot cure is a clear error."""

from __future__ import annotations

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.status import error_from_rpc
from tests.turns.builders import Agent, create_session

WINDOW = 1500
WORDY = "Tell me more about the old harbour district and its history. " * 6


async def test_overflow_recovery_end_to_end(services) -> None:
    pair = services(cache={"local_context_window": WINDOW})
    async with pair.channel() as channel:
        stub = pair.stub(channel)
        policy = policy_pb2.CompactionPolicy(enabled=True, keep_recent_tokens=300)
        session = await create_session(stub, compaction=policy)
        agent = Agent(stub, session.name)
        recovered = None
        for i in range(40):
            response = await agent.turn(f"{i}: {WORDY}")
            if response.compactions:
                recovered = response
                break
        assert recovered is not None, "the conversation never overflowed"
        assert recovered.compactions[0].compaction.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_OVERFLOW
        assert 0 < recovered.reply.usage.prompt_tokens <= WINDOW
        await agent.turn("And after the compaction?")

        request = agent.request(WORDY)
        request.system_instruction.CopyFrom(
            content_pb2.Content(role="user", parts=[content_pb2.Part(text="Rule: be exact. " * (WINDOW // 4))])
        )
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await agent.send(request)
        assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        err = error_from_rpc(info.value)
        assert err.reason == "CONTEXT_WINDOW_EXCEEDED_AFTER_COMPACTION"
        assert int(err.metadata["prompt_tokens"]) > int(err.metadata["context_window"]) == WINDOW
        events = (await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=1000))).events
        assert events[-1].id == request.input[0].id, "the input is kept; no reply was stored"
