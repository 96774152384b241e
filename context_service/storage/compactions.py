"""Compaction on the session store's tables: the view compaction plans on,
and the atomic commit of a COMPACTION event.

The commit runs in the session store's write transaction with the session
row locked (FOR UPDATE on PostgreSQL, BEGIN IMMEDIATE on SQLite), so it is
serialized with every append and every other compaction of the session,
in any process. Inside it ``check_commit`` re-checks what the plan read;
if anything changed, nothing is written (ABORTED, COMPACTION_CONFLICT).

A compaction commit takes the next sequence but leaves the session's etag
alone: it changes nothing a client wrote, so an agent's optimistic appends
(expected_etag) are not failed by a background compaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.domain.compaction_rules.history import History
from context_service.domain.compaction_rules.plan import CompactionPlan, check_commit
from context_service.domain.model import Event, EventKind, SessionKey
from context_service.storage import codec
from context_service.storage.append_plan import not_found as session_not_found
from context_service.storage.sql_store import SqlSessionStore, key_clause
from context_service.storage.tables import events, sessions

_DECODE_SLICE = 32
_COMPACTION = EventKind.COMPACTION.value
_MESSAGE = EventKind.MESSAGE.value

# Created by migration 0002_compaction; declared here so the table metadata
# matches the database.
latest_compaction_index = sa.Index("ix_events_session_pk_kind_sequence", events.c.session_pk, events.c.kind, events.c.sequence)


async def _latest_compaction(conn: AsyncConnection, session_pk: int) -> Any:
    stmt = (
        sa.select(events)
        .where(events.c.session_pk == session_pk, events.c.kind == _COMPACTION)
        .order_by(events.c.sequence.desc())
        .limit(1)
    )
    return (await conn.execute(stmt)).first()


class SqlCompactionStore:
    def __init__(self, store: SqlSessionStore) -> None:
        self._store = store

    async def load_history(self, key: SessionKey, known: History | None = None) -> History:
        """The session's compaction view. With ``known`` (an earlier view of
        the same session), only the events appended since are read, unless
        the session was re-created or compacted meanwhile."""
        async with self._store.read_connection() as conn:
            # One round trip for the row and its latest compaction's sequence
            # (the turn-boundary check runs this every turn).
            latest = (
                sa.select(sa.func.max(events.c.sequence))
                .where(events.c.session_pk == sessions.c.pk, events.c.kind == _COMPACTION)
                .scalar_subquery()
            )
            session = (
                await conn.execute(
                    sa.select(sessions.c.pk, sessions.c.incarnation, sessions.c.last_sequence, latest.label("latest"))
                    .where(key_clause(key))
                )
            ).first()
            if session is None:
                raise session_not_found(key)
            latest_sequence = session.latest or 0
            if (
                known is not None
                and known.generation == session.incarnation
                and known.latest_compaction_sequence == latest_sequence
            ):
                new = await self._decode(conn, sa.select(events).where(
                    events.c.session_pk == session.pk,
                    events.c.sequence > known.last_sequence,
                    events.c.sequence != latest_sequence,  # the known compaction itself
                ).order_by(events.c.sequence))
                if not any(e.is_compaction for e in new):
                    last = max(session.last_sequence, new[-1].sequence if new else known.last_sequence)
                    return History((*known.visible, *new), known.latest_compaction, last, session.incarnation)
            latest_row = await _latest_compaction(conn, session.pk)
            latest_event = codec.event_from_row(latest_row, keep_canonical=False) if latest_row is not None else None
            compaction = latest_event.compaction if latest_event is not None else None
            first_kept = compaction.first_kept_sequence if compaction is not None else 0
            visible = await self._decode(conn, sa.select(events).where(
                events.c.session_pk == session.pk, events.c.kind == _MESSAGE, events.c.sequence >= first_kept
            ).order_by(events.c.sequence))
        last = max(session.last_sequence, visible[-1].sequence if visible else 0)
        return History(tuple(visible), latest_event, last, generation=session.incarnation)

    @staticmethod
    async def _decode(conn: AsyncConnection, stmt: sa.Select[Any]) -> list[Event]:
        rows = (await conn.execute(stmt)).all()
        decoded = []
        for i, row in enumerate(rows):
            decoded.append(codec.event_from_row(row, keep_canonical=False))
            if i % _DECODE_SLICE == _DECODE_SLICE - 1:
                await asyncio.sleep(0)  # a long history must not hold up the RPCs sharing the loop
        return decoded

    async def commit(self, key: SessionKey, plan: CompactionPlan, event: Event) -> Event:
        async with self._store.write_transaction() as conn:
            live = (await self._store.lock_sessions(conn, {key})).get(key)
            if live is None:
                raise session_not_found(key)
            latest_row = await _latest_compaction(conn, live.pk)
            source_ids = (
                await conn.execute(
                    sa.select(events.c.sequence, events.c.event_id)
                    .where(
                        events.c.session_pk == live.pk,
                        events.c.kind == _MESSAGE,
                        events.c.sequence.between(plan.start_sequence, plan.end_sequence),
                    )
                    .order_by(events.c.sequence)
                )
            ).all()
            appended_rows = await conn.execute(
                sa.select(events)
                .where(events.c.session_pk == live.pk, events.c.sequence > plan.read_last_sequence)
                .order_by(events.c.sequence)
            )
            appended = [codec.event_from_row(r, keep_canonical=False) for r in appended_rows]
            event = check_commit(
                plan,
                event,
                latest_row.sequence if latest_row is not None else 0,
                appended,
                generation_now=live.incarnation,
                source_ids_now=[(r.sequence, r.event_id) for r in source_ids],
            )
            sequence = live.last_sequence + 1
            now = self._store.now()
            create_time = event.create_time or now
            stored = dataclasses.replace(event, sequence=sequence, create_time=create_time)
            body = codec.event_body(stored)
            await conn.execute(
                sa.insert(events),
                [codec.event_row(
                    stored, session_pk=live.pk, sequence=sequence, create_time=create_time,
                    body=body, fingerprint=codec.event_fingerprint(stored, body),
                )],
            )
            await conn.execute(
                sa.update(sessions)
                .where(sessions.c.pk == live.pk)
                .values(last_sequence=sequence, event_count=live.event_count + 1, update_time=now)
            )
        return stored
