"""State shared across sessions (an app's, a user's in an app) and the
append that writes an event together with a StateDelta.

An append with a delta runs as one SQLAlchemy write transaction, serialized
with group-commit appends like every store write (the session's row lock
on PostgreSQL, the writer lock and BEGIN IMMEDIATE on SQLite): the event,
the session's state, and the shared states commit together or not at all.
Appends without a delta keep the group-commit path.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from agentctx_common.errors import AlreadyExists
from agentctx_common.reasons import Reason
from context_service.domain.model import Event, JsonObject, SessionKey
from context_service.domain.session_records import AppendResult, StateDelta, session_update_time
from context_service.storage import codec
from context_service.storage.append_batch import etag_mismatch, not_found
from context_service.storage.tables import app_states, events, sessions, user_states


class Writer(Protocol):
    """What an append with state needs of the store (SqlSessionStore)."""

    def write_transaction(self) -> AbstractAsyncContextManager[AsyncConnection]: ...

    def now(self) -> dt.datetime: ...


def _insert(conn: AsyncConnection, table: sa.Table) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


async def merge_shared(conn: AsyncConnection, app: str, user: str, *, app_delta: JsonObject | None,
                       user_delta: JsonObject | None, now: dt.datetime) -> None:
    """Merges the deltas by key into the app's and the user's state rows
    (created when missing; the row is locked while it is merged)."""
    for table, where, ids, delta in (
        (app_states, app_states.c.app == app, {"app": app}, app_delta),
        (user_states, sa.and_(user_states.c.app == app, user_states.c.user_id == user),
         {"app": app, "user_id": user}, user_delta),
    ):
        if not delta:
            continue
        await conn.execute(_insert(conn, table).values(**ids, state_json="{}", update_time=now).on_conflict_do_nothing())
        row = (await conn.execute(sa.select(table.c.state_json).where(where).with_for_update())).first()
        state = json.loads(row.state_json) if row is not None else {}
        state.update(delta)
        await conn.execute(sa.update(table).where(where).values(state_json=codec.dumps(state), update_time=now))


async def load_shared(conn: AsyncConnection, owners: Iterable[tuple[str, str]]
                      ) -> tuple[dict[str, JsonObject], dict[tuple[str, str], JsonObject]]:
    """The app states and user states of (app, user) pairs."""
    pairs = sorted(set(owners))
    if not pairs:
        return {}, {}
    apps = sorted({a for a, _ in pairs})
    app_rows = await conn.execute(sa.select(app_states.c.app, app_states.c.state_json).where(app_states.c.app.in_(apps)))
    stmt = sa.select(user_states.c.app, user_states.c.user_id, user_states.c.state_json)
    if len(pairs) == 1:
        stmt = stmt.where(user_states.c.app == pairs[0][0], user_states.c.user_id == pairs[0][1])
    else:
        stmt = stmt.where(user_states.c.app.in_(apps), user_states.c.user_id.in_(sorted({u for _, u in pairs})))
    user_rows = await conn.execute(stmt)
    return (
        {r.app: json.loads(r.state_json) for r in app_rows},
        {(r.app, r.user_id): json.loads(r.state_json) for r in user_rows if (r.app, r.user_id) in set(pairs)},
    )


async def append_with_state(store: Writer, key: SessionKey, event: Event, *, body: str, fingerprint: str,
                            expected_etag: str | None, delta: StateDelta) -> AppendResult:
    async with store.write_transaction() as conn:
        row = (await conn.execute(
            sa.select(sessions.c.pk, sessions.c.incarnation, sessions.c.version, sessions.c.last_sequence,
                      sessions.c.event_count, sessions.c.state_json)
            .where(sessions.c.app == key.app, sessions.c.user_id == key.user, sessions.c.session_id == key.session)
            .with_for_update()
        )).first()
        if row is None:
            raise not_found(key)
        etag = codec.etag(row.incarnation, row.version)
        stored = (await conn.execute(
            sa.select(events).where(events.c.session_pk == row.pk, events.c.event_id == event.id)
        )).first()
        if stored is not None:
            # A retry: the stored event, and nothing of the delta again.
            if stored.fingerprint != fingerprint:
                raise AlreadyExists(f"event id {event.id} is already stored with different content",
                                    reason=Reason.EVENT_ID_CONFLICT)
            return AppendResult(codec.event_from_row(stored), etag, deduplicated=True)
        if expected_etag is not None and expected_etag != etag:
            raise etag_mismatch(etag)
        now = store.now()
        sequence = row.last_sequence + 1
        create_time = event.create_time or now
        event = dataclasses.replace(event, sequence=sequence, create_time=create_time)
        await conn.execute(sa.insert(events).values(codec.event_row(
            event, session_pk=row.pk, sequence=sequence, create_time=create_time, body=body,
            fingerprint=fingerprint,
        )))
        values: dict[str, Any] = {
            "version": row.version + 1, "last_sequence": sequence, "event_count": row.event_count + 1,
            "update_time": session_update_time(now, create_time),
        }
        if delta.session:
            state = json.loads(row.state_json)
            state.update(delta.session)
            values["state_json"] = codec.dumps(state)
        await conn.execute(sa.update(sessions).where(sessions.c.pk == row.pk).values(values))
        await merge_shared(conn, key.app, key.user, app_delta=delta.app, user_delta=delta.user, now=now)
    return AppendResult(event, codec.etag(row.incarnation, row.version + 1),
                        session_update_time=values["update_time"])
