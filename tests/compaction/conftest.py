"""Fixtures for compaction tests: a migrated database on each backend and
the session store, compaction store and job store on it."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from context_service.storage.compaction_jobs import SqlJobStore
from context_service.storage.compactions import SqlCompactionStore
from context_service.storage.sql_store import SqlSessionStore, open_store
from tests.sessions.helpers import migrate

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'context.db'}"


@dataclass
class Stores:
    url: str
    sessions: SqlSessionStore
    compactions: SqlCompactionStore
    jobs: SqlJobStore


@pytest.fixture
async def stores(db_url: str) -> AsyncIterator[Stores]:
    await migrate(db_url)
    sessions = await open_store(db_url)
    yield Stores(db_url, sessions, SqlCompactionStore(sessions), SqlJobStore(sessions))
    await sessions.close()
