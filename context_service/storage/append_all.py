"""Appends that commit together or not at all (a turn's input events).

The rules are group commit's (``append_batch.plan``: dedup by id and
fingerprint, gapless sequences under the session's row lock); only the
outcome differs: the first item's error is raised, so the transaction
rolls back and nothing of the batch is stored. A retry with the same ids
then stores them all, or finds them all stored (deduplicated).

It runs on SQLAlchemy Core in a ``write_transaction`` of the store (a
pooled connection on PostgreSQL, the serialized writer on SQLite), not on
group commit's own connection, which one batch at a time uses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.domain.model import SessionKey
from context_service.domain.session_records import AppendResult
from context_service.storage.append_batch import (
    Append,
    InsertEvents,
    Live,
    LockSessions,
    Op,
    StoredFingerprints,
    UpdateSessions,
    plan,
)
from context_service.storage.tables import events, sessions

LockRows = Callable[[AsyncConnection, set[SessionKey]], Awaitable[dict[SessionKey, Live]]]


def plan_all(items: Sequence[Append], now: dt.datetime) -> Generator[Op, Any, list[AppendResult]]:
    """``plan``, raising the first error instead of returning it."""
    results = yield from plan(items, now)
    done: list[AppendResult] = []
    for result in results:
        if isinstance(result, Exception):
            raise result
        done.append(result)
    return done


async def append_all(
    conn: AsyncConnection, items: Sequence[Append], now: dt.datetime, lock: LockRows
) -> list[AppendResult]:
    """Runs ``plan_all`` on ``conn`` (inside the caller's transaction)."""
    steps = plan_all(items, now)
    try:
        op = next(steps)
        while True:
            op = steps.send(await _run(conn, op, lock))
    except StopIteration as finished:
        results: list[AppendResult] = finished.value
        return results


async def _run(conn: AsyncConnection, op: Op, lock: LockRows) -> Any:
    if isinstance(op, LockSessions):
        live = await lock(conn, set(op.keys))
        return [
            (s.pk, k.app, k.user, k.session, s.incarnation, s.version, s.last_sequence, s.event_count)
            for k, s in sorted(live.items(), key=lambda kv: kv[1].pk)
        ]
    if isinstance(op, StoredFingerprints):
        # A superset of the pairs (the plan looks each one up).
        stmt = sa.select(events.c.session_pk, events.c.event_id, events.c.fingerprint).where(
            events.c.session_pk.in_(sorted(set(op.pks))), events.c.event_id.in_(sorted(set(op.ids)))
        )
        return [tuple(r) for r in await conn.execute(stmt)]
    if isinstance(op, InsertEvents):
        return await conn.execute(sa.insert(events), [dict(r) for r in op.rows])
    if isinstance(op, UpdateSessions):
        for version, last_sequence, event_count, update_time, pk in op.rows:
            await conn.execute(sa.update(sessions).where(sessions.c.pk == pk).values(
                version=version, last_sequence=last_sequence, event_count=event_count, update_time=update_time,
            ))
        return None
    stmt = sa.select(events).where(events.c.session_pk == op.pk, events.c.event_id == op.event_id)
    return (await conn.execute(stmt)).one()
