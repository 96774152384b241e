"""Semantic memory on real servers (the cache service's local simulator
embedding through Embed over mTLS, the context service on each backend):
searches fuse the lexical and vector rankings and report each match's
ranks; with the cache service down, adds still store (without a vector)
and searches answer lexically with ``semantic_unavailable``, never an
error; a session's retrieval policy fills BuildContext's and Generate's
memory section from the newest user text."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2
from agentctx.memory.v1 import memory_service_pb2 as mpb
from agentctx.memory.v1 import memory_service_pb2_grpc
from agentctx.type.v1 import cache_pb2, content_pb2
from agentctx_common import canonical
from tests.sessions.helpers import migrate, pb_text_event
from tests.support.pair import ServicePair, pair_maker
from tests.turns.builders import MODEL
from tests.turns.conftest import CACHE_DEFAULTS

PARENT = "apps/shop/users/alice"
SESSION = f"{PARENT}/sessions/s1"
SEMANTIC = {"memory_embedding_model": "local-sim-embed"}
FACTS = {
    "allergy": "Bruno Costa is allergic to peanuts",
    "car": "Greta Haas drives a silver convertible",
    "pet": "Ana Alves has a pet parrot that sleeps all day",
    "city": "Ana Alves lives in Porto near the old harbour",
}


@pytest.fixture
async def pairs(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    await migrate(db_url)
    async with pair_maker(certs_dir, tmp_path, context_defaults={"database_url": db_url}) as make:
        yield make


async def _add_facts(memory: memory_service_pb2_grpc.MemoryServiceStub) -> None:
    for memory_id, text in FACTS.items():
        await memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory_id=memory_id,
                                                    memory=mpb.MemoryEntry(text=text)))


async def _search(memory: memory_service_pb2_grpc.MemoryServiceStub, query: str) -> mpb.SearchMemoryResponse:
    response: mpb.SearchMemoryResponse = await memory.SearchMemory(
        mpb.SearchMemoryRequest(parent=PARENT, query=query, limit=3))
    return response


def _ids(response: mpb.SearchMemoryResponse) -> list[str]:
    return [m.memory.name.rsplit("/", 1)[1] for m in response.matches]


async def test_search_fuses_and_falls_back_to_lexical(pairs: Callable[..., Any]) -> None:
    pair: ServicePair = await pairs(context=SEMANTIC)
    memory = memory_service_pb2_grpc.MemoryServiceStub(pair.channel)
    await _add_facts(memory)
    assert pair.provider.counts["embed"] == len(FACTS)

    # "allergy" and "allergic" stem apart in both full-text engines: only
    # the vectors (a shared word stem) find the fact.
    found = await _search(memory, "allergy")
    assert found.ranking == mpb.MEMORY_RANKING_FUSED and not found.semantic_unavailable
    top = found.matches[0]
    assert _ids(found)[0] == "allergy" and (top.lexical_rank, top.vector_rank) == (0, 1)
    assert 0 < top.vector_score <= 1 and top.score == pytest.approx(1 / 61)
    both = await _search(memory, "Where does Ana Alves live?")
    assert _ids(both)[0] == "city" and both.matches[0].lexical_rank == 1 and both.matches[0].vector_rank == 1

    # The cache service goes away: adds store, searches rank lexically.
    await pair.stop_cache()
    await memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory_id="late",
                                                memory=mpb.MemoryEntry(text="Bruno Costa studied law")))
    down = await _search(memory, "Bruno Costa")
    assert down.ranking == mpb.MEMORY_RANKING_LEXICAL and down.semantic_unavailable
    assert set(_ids(down)) == {"allergy", "late"} and {m.vector_rank for m in down.matches} == {0}
    assert (await _search(memory, "allergy")).matches == []

    # Back again: the entry added meanwhile is still found, lexically only.
    await pair.start_cache()
    for _ in range(50):  # the channel reconnects within its 1 s backoff cap
        again = await _search(memory, "Bruno Costa studied")
        if again.ranking == mpb.MEMORY_RANKING_FUSED:
            break
        await asyncio.sleep(0.1)
    assert again.ranking == mpb.MEMORY_RANKING_FUSED and not again.semantic_unavailable
    late = next(m for m in again.matches if m.memory.name.endswith("/late"))
    assert late.lexical_rank == 1 and late.vector_rank == 0


async def test_without_semantic_mode_search_is_lexical_and_embeds_nothing(pairs: Callable[..., Any]) -> None:
    pair: ServicePair = await pairs()
    memory = memory_service_pb2_grpc.MemoryServiceStub(pair.channel)
    await _add_facts(memory)
    found = await _search(memory, "Ana Alves")
    assert found.ranking == mpb.MEMORY_RANKING_LEXICAL and not found.semantic_unavailable
    assert [m.lexical_rank for m in found.matches] == [1, 2] and pair.provider.counts["embed"] == 0


def _user(text: str) -> content_pb2.Content:
    return content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)])


async def test_the_retrieval_policy_fills_the_memory_section(pairs: Callable[..., Any]) -> None:
    pair: ServicePair = await pairs(context=SEMANTIC)
    memory = memory_service_pb2_grpc.MemoryServiceStub(pair.channel)
    await _add_facts(memory)
    config = policy_pb2.ContextConfig(retrieval=policy_pb2.MemoryRetrievalPolicy(enabled=True, limit=1))
    await pair.stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s1",
                                                          session=session_pb2.Session(config=config)))

    built = await pair.stub.BuildContext(pb.BuildContextRequest(
        session=SESSION, input=[_user("What pet does Ana Alves have?")], memory=[_user("from the caller")]))
    texts = [c.parts[0].text for c in built.request.contents]
    assert texts == ["from the caller", FACTS["pet"], "What pet does Ana Alves have?"]
    assert built.accounting.memory.bytes > 0

    # No input: the newest user text of the history is the query, and the
    # memory ends the request, after the history (which stays the prefix).
    await pair.stub.AppendEvent(pb.AppendEventRequest(parent=SESSION, event=pb_text_event("e1", "Greta Haas car?")))
    from_history = await pair.stub.BuildContext(pb.BuildContextRequest(session=SESSION))
    assert [c.parts[0].text for c in from_history.request.contents] == ["Greta Haas car?", FACTS["car"]]

    # A minimum score above every match leaves the section empty.
    strict = policy_pb2.ContextConfig(retrieval=policy_pb2.MemoryRetrievalPolicy(enabled=True, min_score=1.0))
    await pair.stub.UpdateSession(pb.UpdateSessionRequest(
        session=session_pb2.Session(name=SESSION, config=strict), update_mask={"paths": ["config.retrieval"]}))
    none = await pair.stub.BuildContext(pb.BuildContextRequest(session=SESSION))
    assert [c.parts[0].text for c in none.request.contents] == ["Greta Haas car?"]
    assert none.accounting.memory.bytes == 0

    # Generate builds with the same builder: its accounting counts the memory.
    await pair.stub.UpdateSession(pb.UpdateSessionRequest(
        session=session_pb2.Session(name=SESSION, config=config), update_mask={"paths": ["config.retrieval"]}))
    question = "Where does Ana Alves live?"
    expected = await pair.stub.BuildContext(pb.BuildContextRequest(session=SESSION, input=[_user(question)]))
    assert [c.parts[0].text for c in expected.request.contents] == ["Greta Haas car?", FACTS["city"], question]
    turn = await pair.stub.Generate(pb.GenerateRequest(session=SESSION, input=[pb_text_event("e2", question)]))
    assert turn.accounting.memory.bytes == expected.accounting.memory.bytes > 0


async def test_retrieved_memory_leaves_the_cached_prefix_alone(pairs: Callable[..., Any]) -> None:
    """Memory retrieved anew each turn goes after the history, right before
    the current input: turns retrieving different entries share the prefix
    (the history), the one the cache service leases and serves."""
    pair: ServicePair = await pairs(context=SEMANTIC, cache=CACHE_DEFAULTS)
    await _add_facts(memory_service_pb2_grpc.MemoryServiceStub(pair.channel))
    config = policy_pb2.ContextConfig(model=MODEL, retrieval=policy_pb2.MemoryRetrievalPolicy(enabled=True, limit=1),
                                      cache=policy_pb2.CachePolicy(enabled=True))
    sessions = []
    for session_id in ("a", "b", "c"):
        await pair.stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id=session_id,
                                                              session=session_pb2.Session(config=config)))
        sessions.append(f"{PARENT}/sessions/{session_id}")
    history = [f"Tell me about harbour number {i}, its ships, its tides and its old stone quays." for i in range(4)]
    for i, text in enumerate(history):
        await pair.stub.AppendEvent(pb.AppendEventRequest(parent=sessions[0], event=pb_text_event(f"h{i}", text)))

    # BuildContext: different questions retrieve different entries; the
    # contents before the memory, and so the prefix fingerprint, are the same.
    built = []
    for question, fact in (("What pet does Ana Alves have?", "pet"), ("Greta Haas car?", "car")):
        reply = await pair.stub.BuildContext(pb.BuildContextRequest(session=sessions[0], input=[_user(question)]))
        texts = [c.parts[0].text for c in reply.request.contents]
        assert texts == [*history, FACTS[fact], question]
        assert reply.accounting.memory.bytes > len(FACTS[fact])
        req = reply.request
        head = canonical.prefix_json(req.model, None, req.tools, None, req.contents[:len(history)])
        assert reply.accounting.prefix_fingerprint == canonical.fingerprint(head)
        built.append(reply.accounting)
    assert built[0].prefix_fingerprint == built[1].prefix_fingerprint
    assert built[0].envelope_fingerprint != built[1].envelope_fingerprint

    # Generate: the cache service leases that same head (the memory is in the
    # uncached suffix): seen, then created, then a turn retrieving yet
    # another entry is served from it.
    for session in sessions[1:]:
        for i, text in enumerate(history):
            await pair.stub.AppendEvent(pb.AppendEventRequest(parent=session, event=pb_text_event(f"h{i}", text)))
    served = []
    questions = ("What pet does Ana Alves have?", "Greta Haas car?", "Where does Ana Alves live?")
    for session, question in zip(sessions, questions, strict=True):
        turn = await pair.stub.Generate(pb.GenerateRequest(session=session, input=[pb_text_event("q", question)]))
        assert turn.accounting.memory.bytes > 0
        assert turn.reply.cache_metadata.prefix_fingerprint == turn.accounting.prefix_fingerprint
        served.append(turn.reply.cache_metadata)
    assert {c.prefix_fingerprint for c in served} == {built[0].prefix_fingerprint}
    assert [c.state for c in served[1:]] == [cache_pb2.CACHE_STATE_CREATED, cache_pb2.CACHE_STATE_HIT]
