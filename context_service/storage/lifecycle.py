"""What a lifecycle view reads from the session store: counts, the
compaction view and pending background jobs. Read-only; each figure comes
from a bounded query (the visible history is what compaction plans on, so
it is bounded by compaction itself)."""

from __future__ import annotations

import sqlalchemy as sa

from context_service.domain.diagnostics import LifecycleFacts
from context_service.domain.model import EventKind, SessionKey
from context_service.storage.compaction_jobs import SqlJobStore
from context_service.storage.compactions import SqlCompactionStore
from context_service.storage.sql_store import SqlSessionStore, key_clause
from context_service.storage.tables import events, sessions


class SqlLifecycleReader:
    def __init__(self, store: SqlSessionStore) -> None:
        self._store = store
        self._compactions = SqlCompactionStore(store)
        self._jobs = SqlJobStore(store)

    async def lifecycle_facts(self, key: SessionKey) -> LifecycleFacts:
        """NOT_FOUND (SESSION_NOT_FOUND) when the session does not exist."""
        history = await self._compactions.load_history(key)
        stmt = (
            sa.select(sessions.c.event_count, sa.func.count(events.c.sequence))
            .select_from(sessions.outerjoin(
                events, sa.and_(events.c.session_pk == sessions.c.pk, events.c.kind == EventKind.COMPACTION.value)
            ))
            .where(key_clause(key))
            .group_by(sessions.c.pk, sessions.c.event_count)
        )
        async with self._store.read_connection() as conn:
            row = (await conn.execute(stmt)).first()
        event_count, compactions = (int(row[0]), int(row[1])) if row is not None else (0, 0)
        return LifecycleFacts(
            event_count=event_count,
            compaction_count=compactions,
            pending_compaction_jobs=await self._jobs.active_count(key),
            history=history,
        )
