"""MemoryService's messages ⇄ domain.memory, once at the edge."""

from __future__ import annotations

from agentctx.memory.v1 import memory_service_pb2 as pb
from context_service.domain.memory import MemoryKey, MemoryRecord, NewMemory, Ranking, SearchResult
from context_service.mapping.convert import dt_to_ts


def entry_to_proto(record: MemoryRecord, out: pb.MemoryEntry | None = None) -> pb.MemoryEntry:
    out = out if out is not None else pb.MemoryEntry()
    out.name = record.key.name
    out.text = record.text
    out.metadata.update(record.metadata)
    out.session = record.session_name
    out.event_id = record.event_id
    out.author = record.author
    dt_to_ts(record.create_time, out.create_time)
    return out


def new_memory(key: MemoryKey, entry: pb.MemoryEntry, session_id: str) -> NewMemory:
    """The client's entry under ``key`` (its session already parsed to
    ``session_id``); the store dates it."""
    return NewMemory(key=key, text=entry.text, metadata=dict(entry.metadata), session_id=session_id,
                     event_id=entry.event_id, author=entry.author)


_RANKINGS = {Ranking.LEXICAL: pb.MEMORY_RANKING_LEXICAL, Ranking.FUSED: pb.MEMORY_RANKING_FUSED}


def search_response(result: SearchResult) -> pb.SearchMemoryResponse:
    out = pb.SearchMemoryResponse(ranking=_RANKINGS[result.ranking], semantic_unavailable=result.semantic_unavailable)
    for match in result.matches:
        item = out.matches.add(score=match.score, lexical_rank=match.lexical_rank, vector_rank=match.vector_rank,
                               vector_score=match.vector_score)
        entry_to_proto(match.record, item.memory)
    return out
