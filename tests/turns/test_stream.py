"""StreamGenerate: chunks reach the agent before the result, the stored
reply is what a unary turn would have stored (and the only event the
stream stores: chunks are not), and a retry after a broken or a finished
stream completes the turn exactly once."""

from __future__ import annotations

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2
from agentctx_common.status import error_from_rpc
from cache_service.providers.base import ProviderUnavailable
from tests.turns.builders import SYSTEM, TOOLS, Agent, calls_of, create_session, text_of


async def _events(stub, session: str) -> list:
    return list((await stub.ListEvents(pb.ListEventsRequest(parent=session, page_size=1000))).events)


async def test_chunks_arrive_first_and_the_reply_matches_a_unary_turn(pair) -> None:
    streamed = Agent(pair.stub, (await create_session(pair.stub)).name, stream=True)
    unary = Agent(pair.stub, (await create_session(pair.stub, user="user-2")).name)
    texts = ["Hello there, how are you today?", "Please call lookup for the tallest tower.", "", "Thanks!"]
    for text in texts:
        a = await streamed.turn(text)
        b = await unary.turn(text)
        assert a.reply.content == b.reply.content, "a stream stores the reply a unary call would"
        chunks = streamed.chunks[-1]
        assert chunks, "the reply arrived in chunks"
        assert all(c.partial and c.invocation_id == a.reply.invocation_id for c in chunks)
        assert [c.id for c in chunks] == [f"{a.reply.id}.p{i}" for i in range(len(chunks))]
        merged = "".join(text_of(c.content) for c in chunks)
        assert merged == text_of(a.reply.content)
        assert a.reply.usage.prompt_tokens == b.reply.usage.prompt_tokens
    assert streamed.turns == 4 and calls_of(streamed.chunks[1][-1])  # the tool call came as a chunk

    # Chunks are not stored (the proto: "not yet stored"; the reply holds
    # them): the history is what the unary turns stored, in count and ids.
    events = await _events(pair.stub, streamed.session)
    assert not any(e.partial for e in events)
    unary_events = await _events(pair.stub, unary.session)
    assert [e.id for e in events] == [e.id for e in unary_events]
    assert [e.sequence for e in events] == list(range(1, 2 * len(texts) + 1))
    session = await pair.stub.GetSession(pb.GetSessionRequest(name=streamed.session))
    assert session.event_count == len(events) == 2 * len(texts)
    built = await pair.stub.BuildContext(pb.BuildContextRequest(
        session=streamed.session, system_instruction=SYSTEM, tools=TOOLS,
        input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="next")])],
    ))
    assert len(built.request.contents) == len(events) + 1


async def test_retry_after_a_finished_stream_returns_the_stored_reply(pair) -> None:
    agent = Agent(pair.stub, (await create_session(pair.stub)).name, stream=True)
    request = agent.request("Hello.")
    first = await agent.send(request)
    generated = pair.provider.counts["stream"]
    again = await agent.send(request)
    assert again.deduplicated and again.reply == first.reply
    assert agent.chunks[-1] == [], "nothing is streamed twice"
    assert pair.provider.counts["stream"] == generated


async def test_a_stream_broken_midway_stores_nothing_but_the_input_and_a_retry_completes(pair) -> None:
    agent = Agent(pair.stub, (await create_session(pair.stub)).name, stream=True)
    first = await agent.turn("A first question to start the conversation.")
    request = agent.request("A second question, long enough to stream in pieces.")
    # Chunks reach the agent as the provider produces them: two produced, two sent.
    pair.provider.fail_stream_after(2, ProviderUnavailable(status=503))
    received = []
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for item in pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request)):
            received.append(item)
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    err = error_from_rpc(info.value)
    assert err.reason == "PROVIDER_UNAVAILABLE" and err.retry_after is not None
    assert [r.WhichOneof("item") for r in received] == ["chunk", "chunk"]
    events = await _events(pair.stub, agent.session)
    assert [e.id for e in events][-1] == "agent-1", "the input is stored, no chunk and no reply"

    done = await agent.send(request)
    assert not done.deduplicated
    events = await _events(pair.stub, agent.session)
    assert [e.id for e in events] == ["agent-0", first.reply.id, "agent-1", done.reply.id]
