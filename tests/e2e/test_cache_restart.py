"""The cache service killed (kill -9) mid-conversation and started again,
all as real processes: Generate is UNAVAILABLE with RetryInfo, sessions and
BuildContext keep working, the agent's retry with the same event ids
completes the turn exactly once, and caching resumes on its own."""

from __future__ import annotations

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, content_pb2
from agentctx_common.status import error_from_rpc
from tests.turns.builders import Agent, create_session, drain, until_available, user_text

STATE = cache_pb2.CacheState


async def test_cache_service_killed_and_restarted_mid_conversation(services) -> None:
    pair = services()
    async with pair.channel() as channel:
        stub = pair.stub(channel)
        session = await create_session(stub)
        agent = Agent(stub, session.name)
        texts = ["Hello, let us plan a long walk through the city.", "Please call get_weather for Lisbon.", "", "More."]
        before = [(await agent.turn(text)).reply.cache_metadata.state for text in texts]
        assert STATE.CACHE_STATE_CREATED in before

        pair.kill_cache()
        request = agent.request("Asked while the cache service is gone.")
        for attempt in (agent.send(request), drain(stub.StreamGenerate(pb.StreamGenerateRequest(turn=request)))):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await attempt
            assert info.value.code() is grpc.StatusCode.UNAVAILABLE
            err = error_from_rpc(info.value)
            assert err.reason == "CACHE_SERVICE_UNAVAILABLE" and err.retry_after is not None

        # An agent that calls its own model needs only sessions and BuildContext.
        other = await create_session(stub, user="user-2")
        appended = await stub.AppendEvent(pb.AppendEventRequest(parent=other.name, event=user_text("o-1", "hi")))
        assert appended.event.sequence == 1
        built = await stub.BuildContext(pb.BuildContextRequest(
            session=session.name, input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="?")])],
        ))
        assert built.request.contents[-2] == request.input[0].content, "the failed turn's input is stored"

        pair.start_cache()
        done = await until_available(agent.send, request)
        assert not done.deduplicated
        ids = [e.id for e in (await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=1000))).events]
        assert ids.count(request.input[0].id) == 1 and ids.count(done.reply.id) == 1
        assert ids[-2:] == [request.input[0].id, done.reply.id]
        again = await agent.send(request)
        assert again.deduplicated and again.reply == done.reply
        agent.turns += 1

        after = [(await agent.turn(f"After the restart, part {i}.")).reply.cache_metadata.state for i in range(3)]
        assert STATE.CACHE_STATE_CREATED in after or STATE.CACHE_STATE_HIT in after
