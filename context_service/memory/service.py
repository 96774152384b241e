"""Memory's application service: adds a stored session's text to memory,
adds, searches and deletes entries, on ``ports.MemoryStore`` and
``ports.SessionStore``; retrieves memory for a turn (``ports.MemoryRetriever``).

Semantic mode (``SemanticMemory``, from the context service's
``memory_embedding_*`` settings): entries are embedded through the cache
service (``ports.EmbeddingPort``) after they are stored, and a search
embeds its query, ranks the user's vectors by cosine and fuses that ranking
with the lexical one (``domain.memory.fuse``). The cache tier is never
needed for memory to work: an entry whose embedding fails stays stored
without a vector (found lexically), and a search whose query cannot be
embedded answers the lexical ranking with ``semantic_unavailable`` set.
Both count in ``agentctx.memory.embed_failures``.

Telemetry is content-free: the RPC's span gets counts (terms, filters,
matches, entries added, text bytes, vectors stored), never text, queries,
metadata or ids.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from opentelemetry import metrics, trace

from agentctx_common.errors import AgentCtxError
from context_service.domain.config import RetrievalPolicy
from context_service.domain.memory import (
    DEFAULT_RETRIEVAL_LIMIT,
    MAX_QUERY_BYTES,
    AddedFromSession,
    MemoryKey,
    MemoryQuery,
    MemoryRecord,
    NewMemory,
    Ranking,
    SearchResult,
    SemanticMemory,
    entries_from_session,
    fuse,
    fusion_candidates,
    query_terms,
    ranked_lexically,
    retrieved_contents,
)
from context_service.domain.model import Content, SessionKey
from context_service.domain.names import new_id
from context_service.domain.retractions import unretracted
from context_service.ports import EmbeddingPort, MemoryStore, SessionStore

log = logging.getLogger("agentctx.context.memory")
_meter = metrics.get_meter("agentctx.context.memory")
_added = _meter.create_counter("agentctx.memory.added", unit="{entry}", description="Memory entries added.")
_searches = _meter.create_counter("agentctx.memory.searches", description="Memory searches, by whether they matched.")
_embed_failures = _meter.create_counter(
    "agentctx.memory.embed_failures",
    description="Embedding calls that failed (op: add or search; reason): entries stay without a vector, "
    "searches rank lexically.",
)
# Texts one Embed call carries (Gemini's batch bound; the smallest of the providers').
EMBED_BATCH = 100


def _ids() -> Iterator[str]:
    while True:
        yield new_id()


class MemoryService:
    def __init__(self, memory: MemoryStore, sessions: SessionStore, *, semantic: SemanticMemory | None = None,
                 embeddings: EmbeddingPort | None = None, embed_timeout_s: float = 5.0) -> None:
        self.memory = memory
        self._sessions = sessions
        self.semantic = semantic if embeddings is not None else None
        self._embeddings = embeddings
        self._embed_timeout_s = embed_timeout_s

    async def add_session(self, key: SessionKey, remaining: float | None = None) -> AddedFromSession:
        """One entry per user or model event with text; events already in
        memory are counted, not added again. NOT_FOUND for a missing
        session."""
        # Retracted events (and the retractions) are no part of the conversation.
        events = unretracted(await self._sessions.list_events(key, include_compactions=False))
        entries = entries_from_session(key, events, _ids())
        result = await self.memory.add_from_session(entries)
        _added.add(result.added)
        vectors = await self._embed_entries(result.entries, remaining)
        trace.get_current_span().set_attributes({
            "memory.events": len(events), "memory.added": result.added, "memory.existing": result.existing,
            "memory.text_bytes": sum(len(e.text.encode()) for e in entries), "memory.vectors": vectors,
        })
        return result

    async def add(self, entry: NewMemory, remaining: float | None = None) -> MemoryRecord:
        record = await self.memory.add(entry)
        _added.add(1)
        vectors = await self._embed_entries([entry], remaining)
        trace.get_current_span().set_attributes({
            "memory.text_bytes": len(entry.text.encode()), "memory.metadata_keys": len(entry.metadata),
            "memory.vectors": vectors,
        })
        return record

    async def search(self, query: MemoryQuery, remaining: float | None = None) -> SearchResult:
        semantic = self.semantic
        if semantic is None:
            result = SearchResult(ranked_lexically(await self.memory.search(query)))
        else:
            result = await self._fused(query, semantic, remaining)
        matches = result.matches
        _searches.add(1, {"matched": bool(matches), "ranking": result.ranking.value})
        trace.get_current_span().set_attributes({
            "memory.terms": len(query.terms), "memory.filters": len(query.metadata_filter),
            "memory.limit": query.limit, "memory.matches": len(matches), "memory.fused": result.ranking is Ranking.FUSED,
            "memory.semantic_unavailable": result.semantic_unavailable,
        })
        return result

    async def delete(self, key: MemoryKey) -> None:
        await self.memory.delete(key)

    # --- ports.MemoryRetriever -------------------------------------------------------

    async def retrieve(self, key: SessionKey, query: str, policy: RetrievalPolicy,
                       remaining: float | None = None) -> list[Content]:
        """The policy's matches for ``query`` in the session's user's
        memory, as user contents (none for a query without words)."""
        terms = query_terms(query)
        if not terms:
            return []
        limit = policy.limit or DEFAULT_RETRIEVAL_LIMIT
        found = await self.search(MemoryQuery(key.app, key.user, terms, {}, limit, query[:MAX_QUERY_BYTES]),
                                  remaining)
        contents = retrieved_contents(found.matches, policy.min_score)
        trace.get_current_span().set_attribute("memory.retrieved", len(contents))
        return contents

    # --- semantic mode --------------------------------------------------------------

    async def _fused(self, query: MemoryQuery, semantic: SemanticMemory, remaining: float | None) -> SearchResult:
        n = fusion_candidates(query.limit)
        wide = MemoryQuery(query.app, query.user, query.terms, query.metadata_filter, n, query.text)
        lexical = await self.memory.search(wide)
        vectors = await self._embed([query.text or " ".join(query.terms)], query=True, op="search",
                                    remaining=remaining)
        if vectors is None:
            return SearchResult(ranked_lexically(lexical[:query.limit]), Ranking.LEXICAL, semantic_unavailable=True)
        # The lexical candidates' vectors are ranked even past the store's bound.
        nearest = await self.memory.vector_search(query, semantic.model, vectors[0], n,
                                                  also=[m.record.key for m in lexical])
        return SearchResult(fuse(lexical, nearest, query.limit), Ranking.FUSED)

    async def _embed_entries(self, entries: Sequence[NewMemory], remaining: float | None) -> int:
        """Embeds and stores the entries' vectors; how many were stored."""
        semantic = self.semantic
        if semantic is None or not entries:
            return 0
        stored = 0
        for start in range(0, len(entries), EMBED_BATCH):
            batch = entries[start:start + EMBED_BATCH]
            vectors = await self._embed([e.text for e in batch], query=False, op="add", remaining=remaining)
            if vectors is None:
                break
            stored += await self.memory.set_vectors(
                semantic.model, [(e.key, v) for e, v in zip(batch, vectors, strict=True)])
        return stored

    async def _embed(self, texts: list[str], *, query: bool, op: str,
                     remaining: float | None) -> list[list[float]] | None:
        """The texts' vectors, or None when the cache tier could not make
        them (counted; the caller goes on without)."""
        semantic, port = self.semantic, self._embeddings
        assert semantic is not None and port is not None
        budget = self._embed_timeout_s if remaining is None else min(self._embed_timeout_s, remaining)
        try:
            vectors = await port.embed(semantic.provider, semantic.model, texts, query=query,
                                       dimensions=semantic.dimensions, remaining=budget)
        except AgentCtxError as exc:
            reason = exc.reason.value
            _embed_failures.add(1, {"op": op, "reason": reason})
            log.warning("memory embedding failed; going on without vectors",
                        extra={"op": op, "texts": len(texts), "reason": reason})
            return None
        if len(vectors) != len(texts):
            _embed_failures.add(1, {"op": op, "reason": "COUNT_MISMATCH"})
            return None
        return vectors
