"""The append path's lookups use indexes, so an append does not get slower
as its session or the number of sessions grows. SQLite's plans do not
depend on statistics, so they are checked here: a row-value
``IN (VALUES ...)`` makes SQLite scan the whole table (it once made every
append batch scan every event: bench/append's ratio fell from 0.86 to 0.44)."""

from __future__ import annotations

import pathlib
import sqlite3

from context_service.domain.model import SessionKey
from context_service.storage.append_plan import LockSessions, StoredFingerprints
from context_service.storage.append_sql import sqlite_fingerprints_query, sqlite_sessions_queries
from tests.sessions.helpers import migrate


async def test_sqlite_fingerprint_lookup_searches_the_event_id_index(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "context.db"
    await migrate(f"sqlite:///{path}")
    sql, params = sqlite_fingerprints_query(StoredFingerprints([1, 2, 2], ["a", "b", "c"]))
    with sqlite3.connect(path) as conn:
        plan = " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    assert "SEARCH events USING INDEX" in plan and "SCAN events" not in plan, plan


async def test_sqlite_session_lookup_searches_the_unique_index(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "context.db"
    await migrate(f"sqlite:///{path}")
    keys = [SessionKey("app", f"u{i}", f"s{i}") for i in range(450)]
    queries = sqlite_sessions_queries(LockSessions(keys))
    assert len(queries) == 3  # chunked below SQLite's expression depth limit
    with sqlite3.connect(path) as conn:
        for sql, params in queries:
            plan = " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
            assert "SEARCH sessions USING INDEX" in plan and "SCAN sessions" not in plan, plan
            assert conn.execute(sql, params).fetchall() == []
