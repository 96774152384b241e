"""Tool calls come back to the agent, its results are the next input, and
the pairing survives every later selection and compaction: each turn's
context (the one the model gets) holds every result after its call and
every call with its result, whatever compaction did in between."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import event_pb2
from tests.turns.builders import Agent, calls_of, create_session, pairing_violations

LONG = "Describe the route, the stops, the weather and the sights along the way. " * 5
ASK = {"tool": "Please call lookup for the next ferry.", "weather": "Please call get_weather for Oslo.",
       "text": "Thanks, and then?", "long": LONG}

# Tight budgets: compaction runs every few turns, by tokens or by count.
POLICY = policy_pb2.CompactionPolicy(
    enabled=True, context_window=1800, reserve_tokens=400, keep_recent_tokens=250, event_threshold=9,
)


def _context_request(agent: Agent, request: pb.GenerateRequest) -> pb.BuildContextRequest:
    """The BuildContext request Generate makes for ``request``."""
    return pb.BuildContextRequest(
        session=agent.session, input=[e.content for e in request.input],
        system_instruction=request.system_instruction, tools=request.tools,
    )


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(st.sampled_from(sorted(ASK)), min_size=10, max_size=18), stream=st.booleans())
async def test_tool_pairing_survives_compaction(pair, script: list[str], stream: bool) -> None:
    session = await create_session(pair.stub, user=f"u-{uuid.uuid4().hex[:8]}", compaction=POLICY)
    agent = Agent(pair.stub, session.name, stream=stream)
    compactions = 0
    for step in script:
        request = agent.request(ASK[step])
        pending = list(agent.pending)
        # The context this turn's model call gets, built just before it.
        built = await pair.stub.BuildContext(_context_request(agent, request))
        assert pairing_violations(built.request.contents) == []
        if pending:
            ids = {p.function_call.id for c in built.request.contents for p in c.parts if p.HasField("function_call")}
            assert {c.id for c in pending} <= ids, "the calls the input answers are in the context"
        response = await agent.send(request)
        agent.turns += 1
        agent.pending = calls_of(response.reply)
        compactions += len(response.compactions)
        for call in agent.pending:
            assert call.id and call.name in ("lookup", "get_weather")
    events = (await pair.stub.ListEvents(pb.ListEventsRequest(
        parent=session.name, include_compactions=True, page_size=1000,
    ))).events
    replies = [e for e in events if e.author == "model" and not e.partial]
    assert len(replies) == len(script), "one stored reply per turn"
    assert compactions > 0, "the budgets make every script compact"
    assert sum(e.kind == event_pb2.EVENT_KIND_COMPACTION for e in events) == compactions
