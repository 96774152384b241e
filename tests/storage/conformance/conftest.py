"""The store contract's fixtures: each backend of tests/support/backends.py
opened through ``context_service.storage.factory.open_backend`` (the
opener the database URL names), on a migrated, empty database. Tests see
the stores only as the ports of ``context_service.ports``."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from context_service.ports import SessionStore
from context_service.settings import ContextSettings
from context_service.storage.factory import Backend, open_backend
from tests.sessions.helpers import migrate


@pytest.fixture
async def stores(db_url: str, tmp_path: pathlib.Path) -> AsyncIterator[Backend]:
    """Every port of one backend (``factory.Backend``)."""
    await migrate(db_url)
    settings = ContextSettings(database_url=db_url, data_dir=tmp_path / "data", dev_plaintext=True, host="127.0.0.1")
    opened = await open_backend(settings)
    yield opened
    await opened.close()


@pytest.fixture
def store(stores: Backend) -> SessionStore:
    return stores.sessions
