"""A group-commit batch on PostgreSQL is five statements, whatever its size:
BEGIN, the sessions' lock, the stored fingerprints, one write (the events
and the sessions' new heads together), COMMIT. At 32 concurrent callers a
batch holds a few appends, so every statement more is CPU and a round trip
on most appends: a change that adds one fails here by its count."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from agentctx_common.errors import AlreadyExists
from context_service.domain.config import ContextConfig
from context_service.domain.model import SessionKey
from context_service.storage import append_sql
from context_service.storage.sql_store import SqlSessionStore, open_store
from tests.sessions.helpers import migrate, text_event

KEY = SessionKey("app", "u", "s")
WARM = SessionKey("app", "u", "warm")


class Statements:
    """The statements the group-commit connection sends (first word)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, record: Any) -> None:
        self.sent.append(record.query.split(None, 1)[0].rstrip(";").upper())

    def take(self) -> list[str]:
        sent, self.sent = self.sent, []
        return sent


@pytest.fixture
async def logged(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SqlSessionStore, Statements]]:
    statements = Statements()
    connect = append_sql.asyncpg.connect

    async def logging_connect(*args: Any, **kwargs: Any) -> Any:
        conn = await connect(*args, **kwargs)
        conn.add_query_logger(statements)
        return conn

    # Only group commit's connection (append_sql's), not the engine's pool.
    monkeypatch.setattr(append_sql, "asyncpg", SimpleNamespace(connect=logging_connect))
    await migrate(postgres_url)
    store = await open_store(postgres_url)
    try:
        await store.create_session(KEY, state={}, config=ContextConfig())
        await store.create_session(WARM, state={}, config=ContextConfig())
        # The connection's first batch also looks up the array types (once
        # per connection): not counted.
        await store.append_event(WARM, text_event("warm"))
        statements.take()
        yield store, statements
    finally:
        await store.close()


BATCH = ["BEGIN", "SELECT", "SELECT", "WITH", "COMMIT"]


async def test_an_append_is_five_statements(logged: tuple[SqlSessionStore, Statements]) -> None:
    store, statements = logged
    first = await store.append_event(KEY, text_event("e1"))
    assert statements.take() == BATCH
    second = await store.append_event(KEY, text_event("e2"), expected_etag=first.session_etag)
    assert statements.take() == BATCH
    assert (first.event.sequence, second.event.sequence) == (1, 2)
    record = await store.get_session(KEY)
    assert (record.etag, record.event_count, record.last_sequence) == (second.session_etag, 2, 2)
    assert [e.id for e in await store.list_events(KEY)] == ["e1", "e2"]


async def test_a_batch_of_many_events_is_five_statements(logged: tuple[SqlSessionStore, Statements]) -> None:
    store, statements = logged
    results = await store.append_events(KEY, [text_event(f"e{i}") for i in range(20)])
    assert statements.take() == BATCH
    assert [r.event.sequence for r in results] == list(range(1, 21))
    assert (await store.get_session(KEY)).event_count == 20
    assert [e.sequence for e in await store.list_events(KEY)] == list(range(1, 21))


async def test_a_retry_writes_nothing(logged: tuple[SqlSessionStore, Statements]) -> None:
    store, statements = logged
    stored = await store.append_event(KEY, text_event("e1"))
    statements.take()
    again = await store.append_event(KEY, text_event("e1"))
    assert again.deduplicated and again.event.sequence == 1 and again.session_etag == stored.session_etag
    assert statements.take() == ["BEGIN", "SELECT", "SELECT", "SELECT", "COMMIT"]  # the stored event loaded
    with pytest.raises(AlreadyExists):
        await store.append_event(KEY, text_event("e1", text="other"))
    assert (await store.get_session(KEY)).event_count == 1
