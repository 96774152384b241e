"""ports.MemoryStore on the session store's engine (SQLite or PostgreSQL).

Entries are rows of ``memories`` (metadata also by key in
``memory_metadata``, for equality filters). Search matches any of the
query's terms (``domain.memory.query_terms``) in the backend's full-text
index: SQLite's FTS5 table ranked by ``bm25()`` (each term a quoted string,
so nothing is read as FTS5 syntax), PostgreSQL's tsvector column with its
GIN index ranked by ``ts_rank`` (each term through ``plainto_tsquery``,
a bound parameter). On SQLite each match's owner is read from the index on
(pk, app, user_id), not the entry's row. Writes go through the session store's write
transaction, so on SQLite they queue with appends.

Vectors (semantic mode) are a column of the entry, packed float32 with the
model that made them; ``vector_search`` reads the owner's vectors of that
model and ranks them by cosine here, as one matrix product (numpy): no
vector extension is needed on either backend. It ranks the owner's newest
``vector_scan_max`` vectors (``VECTOR_SCAN_MAX``, 100k: 100 MB at 256
dimensions), never more, so a search's time and memory stay bounded
however many entries a user has; older entries are found by the lexical
ranking, and the fused search has the vectors of its lexical candidates
ranked too (``also``). A search without metadata
filters uses this process's copy of the user's vectors (``_VectorCache``,
bounded in bytes) while the user's row of ``memory_vector_versions`` is
unchanged: every write of vectors and every delete bumps it in its own
transaction, so a copy is never used after another replica changed them.
A search with filters reads the matching vectors (filters in SQL).
"""

from __future__ import annotations

import bisect
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentctx_common.errors import AlreadyExists, NotFound
from agentctx_common.reasons import Reason
from context_service.domain.memory import (
    AddedFromSession,
    MemoryKey,
    MemoryMatch,
    MemoryQuery,
    MemoryRecord,
    NewMemory,
    fts5_match,
    normalized,
    pack_vector,
)
from context_service.storage.engine import is_sqlite
from context_service.storage.sql_store import SqlSessionStore
from context_service.storage.tables import memories, memory_metadata, memory_vector_versions

# PostgreSQL's text search configuration (the migration's tsvector uses it).
TS_CONFIG = "english"
_tsv: sa.ColumnClause[Any] = sa.literal_column("memories.tsv")
# SQLite: each FTS5 match's owner read from the (pk, app, user_id) index
# (migration 0010), named: SQLite would look the rowid up in the table,
# a wide row (text, metadata, vector) per match, 1.5x the time at 1M.
_OWNED_MATCHES = sa.text(
    "memories_fts JOIN memories AS owner INDEXED BY ix_memories_pk_owner ON owner.pk = memories_fts.rowid"
)
_owner: dict[str, sa.ColumnClause[Any]] = {c: sa.literal_column(f"owner.{c}") for c in ("pk", "app", "user_id")}


def not_found(key: MemoryKey) -> NotFound:
    return NotFound(f"memory {key.name} not found", reason=Reason.MEMORY_NOT_FOUND)


def _record(row: Any) -> MemoryRecord:
    return MemoryRecord(
        key=MemoryKey(row.app, row.user_id, row.memory_id),
        text=row.text,
        metadata=json.loads(row.metadata_json),
        session_id=row.session_id,
        event_id=row.event_id,
        author=row.author,
        create_time=row.create_time,
    )


def _key_clause(key: MemoryKey) -> sa.ColumnElement[bool]:
    return sa.and_(memories.c.app == key.app, memories.c.user_id == key.user, memories.c.memory_id == key.memory_id)


def _filtered(stmt: sa.Select[Any], query: MemoryQuery,
              pk: sa.ColumnElement[Any] = memories.c.pk) -> sa.Select[Any]:
    """``stmt`` limited to entries (their ``pk``) whose metadata has every
    filter's value."""
    for k, v in sorted(query.metadata_filter.items()):
        stmt = stmt.where(sa.exists().where(
            memory_metadata.c.memory_pk == pk, memory_metadata.c.key == k, memory_metadata.c.value == v,
        ))
    return stmt


# Bytes of vectors one process keeps cached, over all users.
VECTOR_CACHE_BYTES = 256 * 1024 * 1024
# Vectors one search ranks at most: the owner's newest (bench.memory_search).
VECTOR_SCAN_MAX = 100_000


@dataclass(frozen=True, slots=True)
class _Vectors:
    """One user's vectors of one model, in pk order: a matrix of unit rows."""

    version: int
    pks: list[int]
    matrix: np.ndarray[Any, np.dtype[np.float32]]


class _VectorCache:
    """(app, user, model) -> _Vectors, least recently used out first past
    ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str, str], _Vectors] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[str, str, str], version: int) -> _Vectors | None:
        hit = self._items.get(key)
        if hit is None or hit.version != version:
            return None
        self._items.move_to_end(key)
        return hit

    def put(self, key: tuple[str, str, str], vectors: _Vectors) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old.matrix.nbytes
        if vectors.matrix.nbytes > self.max_bytes:
            return
        self._items[key] = vectors
        self._bytes += vectors.matrix.nbytes
        while self._bytes > self.max_bytes:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.matrix.nbytes


def _matrix(blobs: Sequence[bytes], dims: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)


async def _bump_version(conn: AsyncConnection, app: str, user: str) -> None:
    dialect: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(memory_vector_versions).values(app=app, user_id=user, version=1)
    await conn.execute(stmt.on_conflict_do_update(
        index_elements=["app", "user_id"], set_={"version": memory_vector_versions.c.version + 1}))


class SqlMemoryStore:
    """ports.MemoryStore sharing ``store``'s engine, write lock and clock."""

    def __init__(self, store: SqlSessionStore, vector_cache_bytes: int = VECTOR_CACHE_BYTES,
                 vector_scan_max: int = VECTOR_SCAN_MAX) -> None:
        self._store = store
        self._sqlite = is_sqlite(store.engine)
        self._vectors = _VectorCache(vector_cache_bytes)
        self._vector_scan_max = vector_scan_max

    async def _insert(self, conn: AsyncConnection, entry: NewMemory) -> MemoryRecord:
        created = entry.create_time or self._store.now()
        values = {
            "app": entry.key.app, "user_id": entry.key.user, "memory_id": entry.key.memory_id,
            "text": entry.text, "metadata_json": json.dumps(dict(entry.metadata), sort_keys=True, separators=(",", ":")),
            "session_id": entry.session_id, "event_id": entry.event_id, "author": entry.author,
            "create_time": created,
        }
        pk = (await conn.execute(sa.insert(memories).values(values).returning(memories.c.pk))).scalar_one()
        if entry.metadata:
            await conn.execute(sa.insert(memory_metadata), [
                {"memory_pk": pk, "key": k, "value": v} for k, v in sorted(entry.metadata.items())
            ])
        return MemoryRecord(entry.key, entry.text, dict(entry.metadata), entry.session_id, entry.event_id,
                            entry.author, created)

    async def add(self, entry: NewMemory) -> MemoryRecord:
        """The stored entry; the same entry again returns it (ALREADY_EXISTS
        MEMORY_ALREADY_EXISTS for another entry under its id or source)."""
        try:
            async with self._store.write_transaction() as conn:
                existing = (await conn.execute(sa.select(memories).where(_key_clause(entry.key)))).first()
                if existing is None:
                    return await self._insert(conn, entry)
        except IntegrityError:
            # A concurrent add of this id, or another entry holds this source event.
            async with self._store.read_connection() as conn:
                existing = (await conn.execute(sa.select(memories).where(_key_clause(entry.key)))).first()
        if existing is not None and entry.same_entry(record := _record(existing)):
            return record
        raise AlreadyExists(f"memory {entry.key.name} exists with other content, or its event is already in memory",
                            reason=Reason.MEMORY_ALREADY_EXISTS)

    async def add_from_session(self, entries: Sequence[NewMemory]) -> AddedFromSession:
        """Adds the entries whose source event is not in memory yet, in one
        transaction."""
        if not entries:
            return AddedFromSession(0, 0)
        first = entries[0].key
        async with self._store.write_transaction() as conn:
            stmt = sa.select(memories.c.event_id).where(
                memories.c.app == first.app, memories.c.user_id == first.user,
                memories.c.session_id == entries[0].session_id,
                memories.c.event_id.in_(sorted({e.event_id for e in entries})),
            )
            known = set((await conn.execute(stmt)).scalars())
            added: list[NewMemory] = []
            for entry in entries:
                if entry.event_id in known:
                    continue
                known.add(entry.event_id)
                await self._insert(conn, entry)
                added.append(entry)
        return AddedFromSession(len(added), len(entries) - len(added), tuple(added))

    async def set_vectors(self, model: str, vectors: Sequence[tuple[MemoryKey, Sequence[float]]]) -> int:
        """Stores each entry's vector (at unit length) made by ``model``;
        entries deleted meanwhile are skipped. How many were stored."""
        stored = 0
        async with self._store.write_transaction() as conn:
            for key, vector in vectors:
                done = await conn.execute(sa.update(memories).where(_key_clause(key)).values(
                    embedding=pack_vector(normalized(vector)), embedding_model=model))
                stored += done.rowcount
            for app, user in sorted({(key.app, key.user) for key, _ in vectors}):
                await _bump_version(conn, app, user)
        return stored

    async def vector_search(self, query: MemoryQuery, model: str, vector: Sequence[float], n: int,
                            also: Sequence[MemoryKey] = ()) -> list[MemoryMatch]:
        """The owner's entries with a vector of ``model`` that pass the
        metadata filters, by cosine with ``vector``, best first (ties by
        insertion), at most ``n``; of the newest ``vector_scan_max`` such
        entries and the entries ``also`` names (a lexical search's matches)."""
        unit = np.asarray(normalized(vector), dtype="<f4")
        if n <= 0:
            return []
        async with self._store.read_connection() as conn:
            held = await self._user_vectors(conn, query, model, len(unit))
            scored: list[tuple[float, int]] = []
            if held.pks:
                scores = held.matrix @ unit
                top = np.argpartition(-scores, n - 1)[:n] if len(held.pks) > n else np.arange(len(held.pks))
                scored = [(float(scores[i]), held.pks[i]) for i in top]
            named = await self._named_vectors(conn, query, model, len(unit), also, held)
            if named.pks:
                scored += zip((named.matrix @ unit).tolist(), named.pks, strict=True)
            # Best first; ties by insertion.
            best = sorted(scored, key=lambda sp: (-sp[0], sp[1]))[:n]
            if not best:
                return []
            found = {r.pk: r for r in (await conn.execute(
                sa.select(memories).where(memories.c.pk.in_([pk for _, pk in best])))).all()}
        return [MemoryMatch(_record(found[pk]), score) for score, pk in best if pk in found]

    async def _named_vectors(self, conn: AsyncConnection, query: MemoryQuery, model: str, dims: int,
                             keys: Sequence[MemoryKey], held: _Vectors) -> _Vectors:
        """The vectors of ``model`` of the owner's entries ``keys`` names
        that pass the filters and are not in ``held``."""
        ids = sorted({k.memory_id for k in keys if (k.app, k.user) == (query.app, query.user)})
        if not ids:
            return _Vectors(0, [], np.zeros((0, dims), dtype="<f4"))
        stmt = _filtered(sa.select(memories.c.pk, memories.c.embedding).where(
            memories.c.app == query.app, memories.c.user_id == query.user, memories.c.memory_id.in_(ids),
            memories.c.embedding_model == model, memories.c.embedding.is_not(None),
        ), query)

        def in_held(pk: int) -> bool:
            at = bisect.bisect_left(held.pks, pk)  # held.pks ascend
            return at < len(held.pks) and held.pks[at] == pk

        rows = [r for r in (await conn.execute(stmt)).all() if len(r.embedding) == 4 * dims and not in_held(r.pk)]
        return _Vectors(0, [r.pk for r in rows], _matrix([r.embedding for r in rows], dims))

    async def _user_vectors(self, conn: AsyncConnection, query: MemoryQuery, model: str, dims: int) -> _Vectors:
        """The owner's newest ``vector_scan_max`` vectors of ``model`` that
        pass the filters, in pk order: this process's copy while current (no
        filters), else read."""
        stmt = _filtered(sa.select(memories.c.pk, memories.c.embedding).where(
            memories.c.app == query.app, memories.c.user_id == query.user, memories.c.embedding_model == model,
            memories.c.embedding.is_not(None),
        ), query).order_by(memories.c.pk.desc()).limit(self._vector_scan_max)

        async def read(version: int) -> _Vectors:
            rows = [r for r in reversed((await conn.execute(stmt)).all()) if len(r.embedding) == 4 * dims]
            return _Vectors(version, [r.pk for r in rows], _matrix([r.embedding for r in rows], dims))

        if query.metadata_filter:
            return await read(0)
        # The version first: rows read after it are at least that new.
        version = (await conn.execute(sa.select(memory_vector_versions.c.version).where(
            memory_vector_versions.c.app == query.app, memory_vector_versions.c.user_id == query.user,
        ))).scalar() or 0
        slot = (query.app, query.user, model)
        held = self._vectors.get(slot, version)
        if held is None or held.matrix.shape[1] != dims:
            held = await read(version)
            self._vectors.put(slot, held)
        return held

    async def get(self, key: MemoryKey) -> MemoryRecord:
        async with self._store.read_connection() as conn:
            row = (await conn.execute(sa.select(memories).where(_key_clause(key)))).first()
        if row is None:
            raise not_found(key)
        return _record(row)

    async def delete(self, key: MemoryKey) -> None:
        async with self._store.write_transaction() as conn:
            pk = (await conn.execute(sa.select(memories.c.pk).where(_key_clause(key)))).scalar()
            if pk is None:
                raise not_found(key)
            await conn.execute(sa.delete(memory_metadata).where(memory_metadata.c.memory_pk == pk))
            await conn.execute(sa.delete(memories).where(memories.c.pk == pk))
            await _bump_version(conn, key.app, key.user)

    async def search(self, query: MemoryQuery) -> list[MemoryMatch]:
        if not query.terms:
            return []
        # Ranked narrow, (pk, score) per match, then the best rows read: the
        # sort over every match carries two numbers, not the entries'
        # text, metadata and vectors (bench.memory_search at 1M entries).
        if self._sqlite:
            # bm25() is lower for better matches.
            score: sa.ColumnElement[Any] = -sa.func.bm25(sa.literal_column("memories_fts"))
            pk, app, user = _owner["pk"], _owner["app"], _owner["user_id"]
            ranked = (
                sa.select(pk.label("pk"), score.label("score"))
                .select_from(_OWNED_MATCHES)
                .where(sa.literal_column("memories_fts").op("MATCH")(fts5_match(query.terms)))
            )
        else:
            tsquery: sa.ColumnElement[Any] = sa.func.plainto_tsquery(TS_CONFIG, query.terms[0])
            for term in query.terms[1:]:
                tsquery = tsquery.op("||")(sa.func.plainto_tsquery(TS_CONFIG, term))
            # ts_rank: the recall of ts_rank_cd on bench.memory_search's
            # labelled set, in about two thirds of the time.
            score = sa.func.ts_rank(_tsv, tsquery)
            pk, app, user = memories.c.pk, memories.c.app, memories.c.user_id
            ranked = sa.select(pk, score.label("score")).where(_tsv.op("@@")(tsquery))
        ranked = _filtered(ranked.where(app == query.app, user == query.user), query, pk)
        best = ranked.order_by(sa.desc("score"), pk).limit(query.limit).subquery("best")
        stmt = (sa.select(memories, best.c.score).join_from(best, memories, memories.c.pk == best.c.pk)
                .order_by(best.c.score.desc(), best.c.pk))
        async with self._store.read_connection() as conn:
            if not self._sqlite:
                # The planner prices a tsvector match far below its cost and
                # scans the table once a query matches a few percent of it;
                # the GIN index is 3-4 times faster there (bench.memory_search).
                await conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
            rows = (await conn.execute(stmt)).all()
        return [MemoryMatch(_record(r), float(r.score)) for r in rows]
