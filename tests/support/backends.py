"""The storage backends of the context service, one list for the whole
suite: tests/conftest.py's ``backend`` fixture is parametrized by
``BACKENDS`` and ``db_url`` gives each test an empty database of it. Every
test that runs on each backend (the store contract in
tests/storage/conformance/, sessions, compaction, turns, e2e) takes one of
those two fixtures.

A new backend is one more entry in ``BACKENDS`` (marked when it needs a
server, like ``postgres``) and its branch in ``empty_database``; its
opener in ``context_service/storage/factory.py`` then runs the
conformance suite.
"""

from __future__ import annotations

import pathlib

import pytest

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def empty_database(backend: str, request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    """The URL of a new, empty database (no schema) on ``backend``.
    PostgreSQL cases fail instead of skipping under AGENTCTX_REQUIRE_POSTGRES."""
    if backend == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'context.db'}"
    raise ValueError(f"no test database for backend {backend!r}")
