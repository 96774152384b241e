"""One trace per turn across both services, content-free."""

from __future__ import annotations

import pytest
from opentelemetry import trace

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.telemetry import outgoing_metadata
from tests.turns.builders import SYSTEM, Agent, create_session

CONTEXT_RPC = "agentctx.context.v1.ContextService/"
CACHE_RPC = "agentctx.cache.v1.CacheService/"


def _values(span) -> list[str]:  # type: ignore[no-untyped-def]
    values = [str(v) for v in (span.attributes or {}).values()]
    values += [str(v) for event in span.events for v in (event.attributes or {}).values()]
    return [*values, span.name, span.status.description or ""]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_turn_is_one_trace_spanning_both_services(span_exporter, pair, stream: bool) -> None:
    agent = Agent(pair.stub, (await create_session(pair.stub)).name, stream=stream)
    await agent.turn("Hello, a first question to set the prefix.")
    await agent.turn("Please call lookup for the museum hours.")
    request = agent.request()  # the tool result, with a credential in it
    span_exporter.clear()
    with trace.get_tracer("test.agent").start_as_current_span("agent turn") as root:
        if stream:
            async for _ in pair.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request), metadata=outgoing_metadata()):
                pass
        else:
            await pair.stub.Generate(request, metadata=outgoing_metadata())
    trace_id = root.get_span_context().trace_id
    finished = span_exporter.get_finished_spans()
    spans = [s for s in finished if s.context.trace_id == trace_id]
    assert len(spans) == len(finished), "every span of the turn is in the agent's trace"
    by_name = {s.name: s for s in spans}
    rpc = CONTEXT_RPC + ("StreamGenerate" if stream else "Generate")
    cache_rpc = CACHE_RPC + ("StreamGenerateContent" if stream else "GenerateContent")
    for name in (rpc, "turn", "context.build", "cache.acquire", cache_rpc):
        assert name in by_name, name
    assert CACHE_RPC + "AcquireLease" not in by_name, "the call leases for itself"
    if not stream:
        assert by_name["cache.generate"].parent.span_id == by_name[cache_rpc].context.span_id
    assert by_name["cache.acquire"].parent.span_id == by_name[cache_rpc].context.span_id
    assert by_name[rpc].parent.span_id == root.get_span_context().span_id
    assert by_name["turn"].parent.span_id == by_name[rpc].context.span_id
    assert by_name[cache_rpc].parent.span_id == by_name["turn"].context.span_id
    turn = by_name["turn"].attributes
    assert turn["turn.inputs"] == 1 and turn["cache.state"] in ("CREATED", "HIT", "GROWN")
    assert turn["usage.prompt_tokens"] > 0

    forbidden = [
        agent.secret, "cachedContents/", "museum hours", "Paris", "sunny", SYSTEM.parts[0].text[:40],
    ]
    for span in spans:
        for value in _values(span):
            for secret in forbidden:
                assert secret not in value, (span.name, secret)


async def test_a_turn_without_trace_context_starts_its_own_trace(span_exporter, pair) -> None:
    agent = Agent(pair.stub, (await create_session(pair.stub)).name)
    span_exporter.clear()
    await agent.turn("Hello.")
    spans = span_exporter.get_finished_spans()
    root = [s for s in spans if s.name == CONTEXT_RPC + "Generate"]
    assert len(root) == 1 and root[0].parent is None
    assert {s.context.trace_id for s in spans} == {root[0].context.trace_id}
    assert any(s.name == CACHE_RPC + "GenerateContent" for s in spans)
