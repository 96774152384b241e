"""Group commit's primitives for the append plan (append_plan), on the raw driver.

Appends are the hot path, and with group commit a batch is a handful of
statements: SQLAlchemy's per-statement work (compiled-cache lookups,
parameter and result processing, greenlet hops) and aiosqlite's thread hop
per statement were most of an append's cost. So:

- SQLite: a writer connection of our own, used only by one thread; the
  whole batch, BEGIN IMMEDIATE to COMMIT, runs there in one hop.
- PostgreSQL: an asyncpg connection of our own, one driver call per
  statement, and a batch's writes in one statement: the events (one row
  per array element, ``unnest``) and the sessions' new heads. A batch is
  BEGIN, the sessions' lock, the stored fingerprints, that write, COMMIT:
  five round trips whatever its size.

The SQL must match tables.py; everything else in the store uses
SQLAlchemy Core.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from context_service.storage.append_plan import (
    Append,
    InsertEvents,
    InsertToolCalls,
    LoadEvent,
    LockSessions,
    Op,
    Results,
    Retractions,
    StoredFingerprints,
    UpdateSessions,
    execute,
    execute_now,
    plan,
)
from context_service.storage.engine import POSTGRES_SETTINGS, EngineOptions, sqlite_pragmas

EVENT_COLUMNS = (
    "session_pk", "sequence", "event_id", "kind", "author", "invocation_id", "branch", "partial",
    "turn_complete", "create_time", "fingerprint", "fingerprint_version", "body_json",
)
# Their PostgreSQL types, for ``unnest`` of one array per column.
_EVENT_TYPES = ("bigint", "bigint", "text", "text", "text", "text", "text", "boolean", "boolean", "timestamptz",
                "text", "smallint", "text")
_LIVE = "pk, app, user_id, session_id, incarnation, version, last_sequence, event_count"
_INSERT = f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({', '.join('?' * len(EVENT_COLUMNS))})"
TOOL_CALL_COLUMNS = (
    "token_id", "app", "user_id", "session_id", "call_id", "event_id", "state", "expire_time", "staged_json",
    "create_time",
)
_INSERT_CALLS = (f"INSERT INTO tool_calls ({', '.join(TOOL_CALL_COLUMNS)}) "
                 f"VALUES ({', '.join('?' * len(TOOL_CALL_COLUMNS))})")
_UPDATE = "UPDATE sessions SET version = ?, last_sequence = ?, event_count = ?, update_time = ? WHERE pk = ?"
_LOAD = f"SELECT {', '.join(EVENT_COLUMNS)} FROM events WHERE session_pk = ? AND event_id = ?"


def _numbered(sql: str) -> str:
    """'?' placeholders as asyncpg's $1, $2, ..."""
    parts = sql.split("?")
    return "".join(p + (f"${i + 1}" if i < len(parts) - 1 else "") for i, p in enumerate(parts))


def unsupported(op: Op) -> TypeError:
    """State deltas never reach group commit (they run on SQLAlchemy: append_core)."""
    return TypeError(f"group commit does not run {type(op).__name__}")


def _marks(n: int) -> str:
    return ", ".join("?" * n)


# --- PostgreSQL ---------------------------------------------------------------------


class PostgresAppender:
    """A connection of its own (no pool checkout, no pre-ping per batch);
    replaced after any failure, since its state is then unknown."""

    _LOCK = _numbered(
        f"SELECT {_LIVE} FROM sessions WHERE (app, user_id, session_id) IN "
        "(SELECT * FROM unnest(?::text[], ?::text[], ?::text[])) ORDER BY pk FOR UPDATE"
    )
    # Exact (session, event id) pairs: "session_pk = ANY(..) AND event_id =
    # ANY(..)" let the planner scan every event of the sessions, so an
    # append got slower as its session grew.
    _FINGERPRINTS = _numbered(
        "SELECT e.session_pk, e.event_id, e.fingerprint, e.fingerprint_version FROM events e "
        "JOIN unnest(?::bigint[], ?::text[]) AS w(pk, id) ON e.session_pk = w.pk AND e.event_id = w.id"
    )

    # The batch's events and the sessions' new heads in one statement: the
    # plan yields InsertEvents, then (only with tool calls) InsertToolCalls,
    # then UpdateSessions; the events wait for the last (``_pending``).
    _WRITE = _numbered(
        f"WITH inserted AS (INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
        f"SELECT * FROM unnest({', '.join(f'?::{t}[]' for t in _EVENT_TYPES)})) "
        "UPDATE sessions s SET version = u.version, last_sequence = u.last_sequence, event_count = u.event_count, "
        "update_time = u.update_time "
        "FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], ?::timestamptz[], ?::bigint[]) "
        "AS u(version, last_sequence, event_count, update_time, pk) WHERE s.pk = u.pk"
    )
    _INSERT_EVENTS = _numbered(
        f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
        f"SELECT * FROM unnest({', '.join(f'?::{t}[]' for t in _EVENT_TYPES)})"
    )
    _CALLS_SQL = _numbered(_INSERT_CALLS)
    _UPDATE_SQL = _numbered(_UPDATE)
    _LOAD_SQL = _numbered(_LOAD)

    def __init__(self, dsn: str, options: EngineOptions) -> None:
        self._dsn = dsn
        self._options = options
        self._conn: Any = None
        # InsertEvents' rows, written with the UpdateSessions that follows.
        self._pending: list[list[Any]] | None = None

    async def run(self, items: Sequence[Append], now: dt.datetime) -> Results:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(
                self._dsn, timeout=self._options.connect_timeout_s, server_settings=POSTGRES_SETTINGS
            )
        conn = self._conn
        self._pending = None
        try:
            async with conn.transaction():
                results = await execute(plan(items, now), functools.partial(self._run, conn))
                await self._flush(conn)  # never left over: UpdateSessions follows InsertEvents
                return results
        except BaseException:
            self._conn = None
            self._pending = None
            conn.terminate()
            raise

    async def _flush(self, conn: Any) -> None:
        """Writes events still waiting for an UpdateSessions."""
        if self._pending is not None:
            columns, self._pending = self._pending, None
            await conn.execute(self._INSERT_EVENTS, *columns)

    async def _run(self, conn: Any, op: Op) -> Any:
        if isinstance(op, InsertEvents):
            await self._flush(conn)
            self._pending = [[r[c] for r in op.rows] for c in EVENT_COLUMNS]
            return None
        if isinstance(op, UpdateSessions):
            if self._pending is None:
                return await conn.executemany(self._UPDATE_SQL, op.rows)
            events, self._pending = self._pending, None
            heads = [list(c) for c in zip(*op.rows, strict=True)] or [[]] * 5
            return await conn.execute(self._WRITE, *events, *heads)
        if isinstance(op, InsertToolCalls):  # no reference to the events: they may follow
            return await conn.executemany(self._CALLS_SQL, [tuple(r[c] for c in TOOL_CALL_COLUMNS) for r in op.rows])
        await self._flush(conn)  # what follows reads events
        if isinstance(op, LockSessions):
            keys = op.keys
            rows = await conn.fetch(self._LOCK, [k.app for k in keys], [k.user for k in keys], [k.session for k in keys])
            return [tuple(r) for r in rows]
        if isinstance(op, StoredFingerprints):
            return [tuple(r) for r in await conn.fetch(self._FINGERPRINTS, list(op.pks), list(op.ids))]
        if isinstance(op, Retractions):
            return [tuple(r) for r in await conn.fetch(_numbered(op.sql), *op.params)]
        if not isinstance(op, LoadEvent):
            raise unsupported(op)
        row = await conn.fetchrow(self._LOAD_SQL, op.pk, op.event_id)
        return SimpleNamespace(**dict(row))

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


# --- SQLite -----------------------------------------------------------------------------


# Keys per sessions query: an OR of equality groups, and SQLite caps the
# depth of an expression tree (1,000).
_SQLITE_KEYS_PER_QUERY = 200


def sqlite_sessions_queries(op: LockSessions) -> list[tuple[str, list[Any]]]:
    """The sessions' rows (the write lock is the database's, BEGIN
    IMMEDIATE). An OR of equality groups searches the unique index once per
    key; a row-value ``IN (VALUES ...)`` would scan every session."""
    queries = []
    for start in range(0, len(op.keys), _SQLITE_KEYS_PER_QUERY):
        keys = op.keys[start:start + _SQLITE_KEYS_PER_QUERY]
        where = " OR ".join(["(app = ? AND user_id = ? AND session_id = ?)"] * len(keys))
        queries.append((f"SELECT {_LIVE} FROM sessions WHERE {where}",
                        [v for k in keys for v in (k.app, k.user, k.session)]))
    return queries


def sqlite_fingerprints_query(op: StoredFingerprints) -> tuple[str, list[Any]]:
    """SQLite searches the (session_pk, event_id) index for two IN lists
    (a superset of the pairs; the plan filters), but scans the whole table
    for a row-value ``IN (VALUES ...)``."""
    pks, ids = sorted(set(op.pks)), sorted(set(op.ids))
    sql = (f"SELECT session_pk, event_id, fingerprint, fingerprint_version FROM events "
           f"WHERE session_pk IN ({_marks(len(pks))}) AND event_id IN ({_marks(len(ids))})")
    return sql, [*pks, *ids]


def _sqlite_time(value: dt.datetime) -> str:
    # SQLAlchemy's SQLite DATETIME format, so its reads parse what we write.
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


class SqliteAppender:
    """BEGIN IMMEDIATE holds the database's write lock for the batch, so no
    row locks are needed."""

    def __init__(self, path: str, options: EngineOptions) -> None:
        self._path = path
        self._options = options
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-appender")
        self._conn: sqlite3.Connection | None = None

    async def run(self, items: Sequence[Append], now: dt.datetime) -> Results:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._run_batch, items, now)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=self._options.sqlite_busy_timeout_ms / 1000)
            for pragma in sqlite_pragmas(self._options):
                conn.execute(pragma)
            self._conn = conn
        return self._conn

    def _run_batch(self, items: Sequence[Append], now: dt.datetime) -> Results:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            results = execute_now(plan(items, now), functools.partial(self._run, conn))
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        return results

    def _run(self, conn: sqlite3.Connection, op: Op) -> Any:
        if isinstance(op, LockSessions):
            rows = []
            for sql, params in sqlite_sessions_queries(op):
                rows += conn.execute(sql, params).fetchall()
            return sorted(rows)  # by pk, the first column
        if isinstance(op, StoredFingerprints):
            return conn.execute(*sqlite_fingerprints_query(op)).fetchall()
        if isinstance(op, Retractions):
            return conn.execute(op.sql, op.params).fetchall()
        if isinstance(op, InsertEvents):
            return conn.executemany(_INSERT, [
                tuple(_sqlite_time(r[c]) if c == "create_time" else r[c] for c in EVENT_COLUMNS) for r in op.rows
            ])
        if isinstance(op, InsertToolCalls):
            return conn.executemany(_INSERT_CALLS, [
                tuple(_sqlite_time(r[c]) if c.endswith("_time") else r[c] for c in TOOL_CALL_COLUMNS) for r in op.rows
            ])
        if isinstance(op, UpdateSessions):
            return conn.executemany(_UPDATE, [(v, s, n, _sqlite_time(t), pk) for v, s, n, t, pk in op.rows])
        if not isinstance(op, LoadEvent):
            raise unsupported(op)
        row = dict(zip(EVENT_COLUMNS, conn.execute(_LOAD, (op.pk, op.event_id)).fetchone(), strict=True))
        row["create_time"] = dt.datetime.fromisoformat(row["create_time"]).replace(tzinfo=dt.UTC)
        return SimpleNamespace(**row)

    async def close(self) -> None:
        def close_connection() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await asyncio.get_running_loop().run_in_executor(self._thread, close_connection)
        self._thread.shutdown(wait=True)


def appender_for(engine: AsyncEngine, options: EngineOptions) -> PostgresAppender | SqliteAppender:
    if engine.dialect.name == "sqlite":
        return SqliteAppender(engine.url.database or "", options)
    return PostgresAppender(engine.url.set(drivername="postgresql").render_as_string(hide_password=False), options)
