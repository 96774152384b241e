"""Session heads (``ports.SessionHeads``): what selection needs of a
session row (incarnation, last sequence, config), read with one query.

``SqliteSessionHeads`` reads on a dedicated read connection on the event
loop's own thread, without the thread hops an SQLAlchemy session read
takes; ``StoreSessionHeads`` goes through the store's get_session (any
backend). ``storage.factory`` picks one per backend. The SQLite one also
reads the events after a sequence (``events_after``) for the store's
``list_events``: a client that polls a session's new events (the OpenAI
Agents session's every read) costs a primary-key range scan; and a tool
token's row (``tool_call``: the revocation check of every tool RPC) and
whether an appended function response answers an open call
(``any_open_call``), each an index lookup.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import NamedTuple

from agentctx_common.errors import NotFound
from agentctx_common.reasons import Reason
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, EventKind, SessionKey
from context_service.domain.session_records import SessionHead, head_of
from context_service.ports import SessionStore
from context_service.storage import codec
from context_service.storage.tables import events, sessions, tool_calls


class _EventRow(NamedTuple):
    """An events row as ``codec.event_from_row`` reads it."""

    event_id: str
    author: str
    sequence: int
    invocation_id: str
    branch: str
    partial: int
    turn_complete: int
    create_time: dt.datetime
    kind: str
    body_json: str


_EVENT_COLUMNS = _EventRow._fields

# How long a head read on the loop thread may wait for a busy SQLite file
# before it goes through the store instead.
BUSY_TIMEOUT_MS = 20


class StoreSessionHeads:
    """Heads through the store's get_session."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    async def get(self, key: SessionKey) -> SessionHead:
        return head_of(await self._store.get_session(key))

    async def close(self) -> None:
        pass


class SqliteSessionHeads:
    """Heads of the SQLite file at ``path``, written by ``store``.

    The read runs on the event loop's own thread: a primary-key
    lookup on an open WAL connection takes microseconds, less than handing
    it to a worker thread and back. WAL readers do not wait for writers; if
    the database is busy anyway (a checkpoint, recovery), the read goes
    through the store instead of blocking the loop.
    """

    def __init__(self, store: SessionStore, path: str) -> None:
        self._store = store
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._configs: dict[str, ContextConfig] = {}
        t = sessions.c
        self._sql = (
            f"SELECT {t.incarnation.name}, {t.last_sequence.name}, {t.config_json.name} FROM {sessions.name} "
            f"WHERE {t.app.name} = ? AND {t.user_id.name} = ? AND {t.session_id.name} = ?"
        )

    async def get(self, key: SessionKey) -> SessionHead:
        """NOT_FOUND (SESSION_NOT_FOUND) when there is no such session."""
        try:
            db = self._db or self._open()
            row = db.execute(self._sql, (key.app, key.user, key.session)).fetchone()
        except sqlite3.Error:
            return head_of(await self._store.get_session(key))
        if row is None:
            raise NotFound(f"session {key.name} not found", reason=Reason.SESSION_NOT_FOUND)
        incarnation, last_sequence, config_text = row
        config = self._configs.get(config_text)
        if config is None:
            if len(self._configs) > 1024:
                self._configs.clear()
            config = self._configs[config_text] = codec.config_from_text(config_text)
        return SessionHead(key, incarnation, last_sequence, config)

    def events_after(self, key: SessionKey, after_sequence: int, limit: int | None,
                     include_compactions: bool) -> list[Event] | None:
        """The session's events past ``after_sequence``, in order, at most
        ``limit``; NOT_FOUND without the session; None when SQLite is busy
        (the caller reads through the store)."""
        sql = self._events_sql + ("" if include_compactions else f" AND kind = '{EventKind.MESSAGE.value}'")
        sql += " ORDER BY sequence" + (f" LIMIT {int(limit)}" if limit is not None else "")
        try:
            db = self._db or self._open()
            pk = db.execute(self._pk_sql, (key.app, key.user, key.session)).fetchone()
            if pk is None:
                raise NotFound(f"session {key.name} not found", reason=Reason.SESSION_NOT_FOUND)
            rows = db.execute(sql, (pk[0], after_sequence)).fetchall()
        except sqlite3.Error:
            return None
        return [codec.event_from_row(_EventRow._make((*r[:7], _utc(r[7]), *r[8:]))) for r in rows]

    def tool_call(self, token_id: str) -> tuple[str, str] | None:
        """(state, staged JSON) of a tool token's row, ("", "{}") when it has
        none; None when SQLite is busy (the caller reads through the store).
        A committed collection is seen at once: a WAL reader reads the
        latest commit at each statement."""
        try:
            db = self._db or self._open()
            row = db.execute(self._call_sql, (token_id,)).fetchone()
        except sqlite3.Error:
            return None
        return (str(row[0]), str(row[1])) if row is not None else ("", "{}")

    def any_open_call(self, key: SessionKey, call_ids: list[str]) -> bool | None:
        """Whether one of ``call_ids`` of the session has an open tool call;
        None when SQLite is busy."""
        t = tool_calls.c
        sql = (f"SELECT 1 FROM {tool_calls.name} WHERE {t.app.name} = ? AND {t.user_id.name} = ? "
               f"AND {t.session_id.name} = ? AND {t.call_id.name} IN ({', '.join('?' * len(call_ids))}) "
               f"AND {t.state.name} = 'open' LIMIT 1")
        try:
            db = self._db or self._open()
            row = db.execute(sql, (key.app, key.user, key.session, *call_ids)).fetchone()
        except sqlite3.Error:
            return None
        return row is not None

    _call_sql = (f"SELECT {tool_calls.c.state.name}, {tool_calls.c.staged_json.name} FROM {tool_calls.name} "
                 f"WHERE {tool_calls.c.token_id.name} = ?")
    _pk_sql = (f"SELECT {sessions.c.pk.name} FROM {sessions.name} "
               f"WHERE {sessions.c.app.name} = ? AND {sessions.c.user_id.name} = ? AND {sessions.c.session_id.name} = ?")
    _events_sql = (f"SELECT {', '.join(getattr(events.c, c).name for c in _EVENT_COLUMNS)} FROM {events.name} "
                   f"WHERE {events.c.session_pk.name} = ? AND {events.c.sequence.name} > ?")

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, isolation_level=None)
        db.execute("PRAGMA query_only=1")
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._db = db
        return db

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()


def _utc(stored: str) -> dt.datetime:
    """A time as SQLAlchemy stores it in SQLite (no zone: UTC)."""
    return dt.datetime.fromisoformat(stored).replace(tzinfo=dt.UTC)
