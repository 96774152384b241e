"""Threshold, background and overflow compaction driven by real agent turns
(Generate through the cache service's local simulator), on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from tests.compaction.rpc_support import events
from tests.sessions.helpers import migrate
from tests.support.pair import start_pair
from tests.turns.builders import Agent, create_session, pairing_violations

WORDY = "Tell me more about the old harbour district, its warehouses and its ferries. " * 5


@pytest.fixture
async def pair(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path):
    await migrate(db_url)
    made = []

    async def make(cache: dict | None = None):
        p = await start_pair(
            certs_dir, tmp_path / f"pair-{len(made)}",
            cache={"local_min_cache_tokens": 64, "min_prefix_tokens": 64, **(cache or {})},
            context={"database_url": db_url, "compaction_job_poll_s": 0.05, "compaction_extractive_processes": 0},
        )
        made.append(p)
        return p

    yield make
    for p in made:
        await p.close()


async def built_contents(stub, session: str) -> list[content_pb2.Content]:
    reply = await stub.BuildContext(pb.BuildContextRequest(
        session=session, input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="next?")])],
    ))
    return list(reply.request.contents)


async def test_threshold_compaction_at_turn_boundaries(pair):
    p = await pair()
    policy = policy_pb2.CompactionPolicy(enabled=True, context_window=4000, reserve_tokens=1000, keep_recent_tokens=1500)
    session = await create_session(p.stub, compaction=policy)
    agent = Agent(p.stub, session.name)
    found = None
    for i in range(40):
        response = await agent.turn(f"{i}: {WORDY}" if i % 3 else "Please call lookup for the harbour opening hours.")
        if response.compactions:
            found = response.compactions[0]
            break
    assert found is not None, "the conversation never reached the threshold"
    assert found.compaction.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_THRESHOLD
    for _ in range(3):
        await agent.turn("Please call lookup for the ferry times." if not agent.pending else "")
    assert pairing_violations(await built_contents(p.stub, session.name)) == []


async def test_background_compaction_from_agent_turns(pair):
    p = await pair()
    policy = policy_pb2.CompactionPolicy(enabled=True, background_tokens=2500, keep_recent_tokens=1000)
    session = await create_session(p.stub, compaction=policy)
    agent = Agent(p.stub, session.name)
    scheduled = False
    for i in range(40):
        response = await agent.turn(f"{i}: {WORDY}")
        assert not response.compactions  # background never compacts inside the turn
        if response.background_compaction_scheduled:
            scheduled = True
            break
    assert scheduled, "no background compaction was scheduled"
    for _ in range(400):
        found = [e for e in await events(p.stub, session.name) if e.kind == event_pb2.EVENT_KIND_COMPACTION]
        if found:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the background job never committed")
    assert found[0].compaction.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_BACKGROUND
    response = await agent.turn("And what about the lighthouse?")  # the next turn builds on the summary
    assert response.accounting.compaction_sequence == found[0].sequence
    assert pairing_violations(await built_contents(p.stub, session.name)) == []


async def test_overflow_compaction_and_single_retry(pair):
    p = await pair(cache={"local_context_window": 1500})
    policy = policy_pb2.CompactionPolicy(enabled=True, keep_recent_tokens=300)
    session = await create_session(p.stub, compaction=policy)
    agent = Agent(p.stub, session.name)
    recovered = None
    for i in range(40):
        response = await agent.turn(f"{i}: {WORDY}")
        if response.compactions:
            recovered = response
            break
    assert recovered is not None, "the conversation never overflowed"
    assert recovered.compactions[0].compaction.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_OVERFLOW
    assert recovered.reply.usage.prompt_tokens <= 1500
