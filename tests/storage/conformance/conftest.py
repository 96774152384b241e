"""The store contract's fixtures: each backend of tests/support/backends.py
opened through ``context_service.storage.factory.open_backend`` (the
opener the database URL names), on a migrated, empty database. Tests see
the stores only as the ports of ``context_service.ports``."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from context_service.ports import SessionStore
from context_service.settings import ContextSettings
from context_service.storage.factory import Backend, open_backend
from tests.sessions.helpers import migrate


@contextlib.asynccontextmanager
async def open_stores(db_url: str, tmp_path: pathlib.Path, **overrides: Any) -> AsyncIterator[Backend]:
    """Every port of one backend (``factory.Backend``) on a migrated database."""
    await migrate(db_url)
    settings = ContextSettings(database_url=db_url, data_dir=tmp_path / "data", dev_plaintext=True, host="127.0.0.1",
                               **overrides)
    opened = await open_backend(settings)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def stores(db_url: str, tmp_path: pathlib.Path) -> AsyncIterator[Backend]:
    """Every port of one backend (``factory.Backend``)."""
    async with open_stores(db_url, tmp_path) as opened:
        yield opened


@pytest.fixture
def store(stores: Backend) -> SessionStore:
    return stores.sessions
