"""A tool-using conversation through both services as real processes, on
SQLite and on PostgreSQL: unary and streamed turns, cached prefixes,
compaction, and tool pairing in every context the model gets."""

from __future__ import annotations

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import cache_pb2, event_pb2
from tests.e2e.processes import upgrade_database
from tests.turns.builders import Agent, calls_of, create_session, pairing_violations

STATE = cache_pb2.CacheState
SCRIPT = [
    "Hello! I am planning a trip to Norway.",
    "Please call get_weather for Oslo.",
    "",  # the tool result
    "What should I pack for that weather? Give me a detailed list for a week of hiking.",
    "Please call lookup for ferry times from Bergen.",
    "",
    "Summarize the plan so far.",
    "And what about museums in Oslo? Describe three of them in detail.",
    "Please call lookup for the museum opening hours.",
    "",
    "Thanks, that is all for today.",
]


@pytest.fixture
def database(backend: str, request) -> dict:  # type: ignore[no-untyped-def]
    """Context service settings for each store (the embedded SQLite file by default)."""
    if backend == "sqlite":
        return {}
    url = request.getfixturevalue("postgres_url")
    upgrade_database(url)
    return {"database_url": url}


async def test_a_tool_using_conversation_end_to_end(services, database: dict) -> None:
    pair = services(context=database)
    async with pair.channel() as channel:
        stub = pair.stub(channel)
        policy = policy_pb2.CompactionPolicy(enabled=True, event_threshold=16, keep_recent_tokens=600)
        session = await create_session(stub, compaction=policy)
        agent = Agent(stub, session.name)
        replies = []
        for i, text in enumerate(SCRIPT):
            agent.stream = i % 3 == 2
            request_ = agent.request(text)
            built = await stub.BuildContext(pb.BuildContextRequest(
                session=session.name, input=[e.content for e in request_.input],
                system_instruction=request_.system_instruction, tools=request_.tools,
            ))
            assert pairing_violations(built.request.contents) == [], i
            response = await agent.send(request_)
            agent.turns += 1
            agent.pending = calls_of(response.reply)
            replies.append(response)
            if "call" in text:
                assert agent.pending, f"turn {i}: the model called the tool"
            if not text:
                assert response.reply.turn_complete, f"turn {i}: the tool result was used"

        states = [r.reply.cache_metadata.state for r in replies]
        assert STATE.CACHE_STATE_CREATED in states
        assert STATE.CACHE_STATE_HIT in states or STATE.CACHE_STATE_GROWN in states
        assert sum(r.reply.usage.cached_prompt_tokens for r in replies) > 0
        assert any(r.compactions for r in replies), "the event threshold compacted the session"

        events = (await stub.ListEvents(pb.ListEventsRequest(
            parent=session.name, include_compactions=True, page_size=1000,
        ))).events
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        messages = [e for e in events if e.kind == event_pb2.EVENT_KIND_MESSAGE and not e.partial]
        assert [e.id for e in messages] == [x for i, r in enumerate(replies) for x in (f"agent-{i}", r.reply.id)]
