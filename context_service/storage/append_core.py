"""The append plan's operations (``append_plan.Op``) on SQLAlchemy Core.

``append_plan.execute`` runs a plan with ``CoreOps`` inside a
``write_transaction`` of the store (a pooled connection on PostgreSQL, the
serialized writer on SQLite), not on group commit's own connection, which
one batch at a time uses. This is the path of ``append_events`` (all or
nothing: ``plan_all``'s first error rolls the transaction back, and a retry
with the same ids stores them all or finds them all stored), of an append
with a state delta (the event and its states commit together), and of a
new session's shared state (``merge_shared``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.domain.model import SessionKey
from context_service.storage import codec
from context_service.storage.append_plan import (
    RETRACTION_LIKE,
    InsertEvents,
    InsertToolCalls,
    Live,
    LoadEvent,
    LockSessions,
    LockSharedStates,
    Op,
    Retractions,
    SessionStates,
    StoredFingerprints,
    UpdateSessions,
    WriteSessionStates,
    WriteSharedStates,
)
from context_service.storage.shared_state import lock_shared, write_shared
from context_service.storage.tables import events, sessions, tool_calls

LockRows = Callable[[AsyncConnection, set[SessionKey]], Awaitable[dict[SessionKey, Live]]]


class CoreOps:
    """The operations on ``conn``; ``lock`` locks session rows (the store's
    ``lock_sessions``)."""

    def __init__(self, conn: AsyncConnection, lock: LockRows) -> None:
        self._conn = conn
        self._lock = lock

    async def __call__(self, op: Op) -> Any:
        conn = self._conn
        if isinstance(op, LockSessions):
            live = await self._lock(conn, set(op.keys))
            return [
                (s.pk, k.app, k.user, k.session, s.incarnation, s.version, s.last_sequence, s.event_count)
                for k, s in sorted(live.items(), key=lambda kv: kv[1].pk)
            ]
        if isinstance(op, StoredFingerprints):
            # A superset of the pairs (the plan looks each one up).
            stmt = sa.select(events.c.session_pk, events.c.event_id, events.c.fingerprint,
                             events.c.fingerprint_version).where(
                events.c.session_pk.in_(sorted(set(op.pks))), events.c.event_id.in_(sorted(set(op.ids)))
            )
            return [tuple(r) for r in await conn.execute(stmt)]
        if isinstance(op, Retractions):
            first = sa.select(sa.func.min(events.c.sequence)).where(
                events.c.session_pk == op.pk, events.c.event_id.in_(op.targets)).scalar_subquery()
            stmt = sa.select(events.c.event_id, events.c.kind, events.c.body_json).where(
                events.c.session_pk == op.pk,
                sa.or_(events.c.event_id.in_(op.targets),
                       sa.and_(events.c.body_json.like(RETRACTION_LIKE), events.c.sequence > first)))
            return [tuple(r) for r in await conn.execute(stmt)]
        if isinstance(op, InsertEvents):
            return await conn.execute(sa.insert(events), [dict(r) for r in op.rows])
        if isinstance(op, InsertToolCalls):
            return await conn.execute(sa.insert(tool_calls), [dict(r) for r in op.rows])
        if isinstance(op, UpdateSessions):
            for version, last_sequence, event_count, update_time, pk in op.rows:
                await conn.execute(sa.update(sessions).where(sessions.c.pk == pk).values(
                    version=version, last_sequence=last_sequence, event_count=event_count, update_time=update_time,
                ))
            return None
        if isinstance(op, LoadEvent):
            stmt = sa.select(events).where(events.c.session_pk == op.pk, events.c.event_id == op.event_id)
            return (await conn.execute(stmt)).one()
        if isinstance(op, SessionStates):
            rows = await conn.execute(sa.select(sessions.c.pk, sessions.c.state_json).where(sessions.c.pk.in_(op.pks)))
            return {r.pk: json.loads(r.state_json) for r in rows}
        if isinstance(op, WriteSessionStates):
            for pk, state in op.states.items():
                await conn.execute(sa.update(sessions).where(sessions.c.pk == pk).values(state_json=codec.dumps(state)))
            return None
        if isinstance(op, LockSharedStates):
            return await lock_shared(conn, op.apps, op.users, op.now)
        assert isinstance(op, WriteSharedStates)
        return await write_shared(conn, op.apps, op.users, op.now)
