"""Memory's application service: adds a stored session's text to memory,
adds, searches and deletes entries, on ``ports.MemoryStore`` and
``ports.SessionStore``.

Telemetry is content-free: the RPC's span gets counts (terms, filters,
matches, entries added, text bytes), never text, queries, metadata or ids.
"""

from __future__ import annotations

from collections.abc import Iterator

from opentelemetry import metrics, trace

from context_service.domain.memory import (
    AddedFromSession,
    MemoryKey,
    MemoryMatch,
    MemoryQuery,
    MemoryRecord,
    NewMemory,
    entries_from_session,
)
from context_service.domain.model import SessionKey
from context_service.domain.names import new_id
from context_service.domain.retractions import unretracted
from context_service.ports import MemoryStore, SessionStore

_meter = metrics.get_meter("agentctx.context.memory")
_added = _meter.create_counter("agentctx.memory.added", unit="{entry}", description="Memory entries added.")
_searches = _meter.create_counter("agentctx.memory.searches", description="Memory searches, by whether they matched.")


def _ids() -> Iterator[str]:
    while True:
        yield new_id()


class MemoryService:
    def __init__(self, memory: MemoryStore, sessions: SessionStore) -> None:
        self.memory = memory
        self._sessions = sessions

    async def add_session(self, key: SessionKey) -> AddedFromSession:
        """One entry per user or model event with text; events already in
        memory are counted, not added again. NOT_FOUND for a missing
        session."""
        # Retracted events (and the retractions) are no part of the conversation.
        events = unretracted(await self._sessions.list_events(key, include_compactions=False))
        entries = entries_from_session(key, events, _ids())
        result = await self.memory.add_from_session(entries)
        _added.add(result.added)
        trace.get_current_span().set_attributes({
            "memory.events": len(events), "memory.added": result.added, "memory.existing": result.existing,
            "memory.text_bytes": sum(len(e.text.encode()) for e in entries),
        })
        return result

    async def add(self, entry: NewMemory) -> MemoryRecord:
        record = await self.memory.add(entry)
        _added.add(1)
        trace.get_current_span().set_attributes({
            "memory.text_bytes": len(entry.text.encode()), "memory.metadata_keys": len(entry.metadata),
        })
        return record

    async def search(self, query: MemoryQuery) -> list[MemoryMatch]:
        matches = await self.memory.search(query)
        _searches.add(1, {"matched": bool(matches)})
        trace.get_current_span().set_attributes({
            "memory.terms": len(query.terms), "memory.filters": len(query.metadata_filter),
            "memory.limit": query.limit, "memory.matches": len(matches),
        })
        return matches

    async def delete(self, key: MemoryKey) -> None:
        await self.memory.delete(key)
