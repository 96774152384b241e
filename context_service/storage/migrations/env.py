"""Alembic environment for the context service's database.

``agentctx db upgrade`` and the service pass a live connection in
``config.attributes["connection"]``. Run by the ``alembic`` command (to
write a new revision), the URL comes from ``-x url=...`` or
AGENTCTX_CONTEXT_DATABASE_URL, and an async engine is used.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import sqlalchemy as sa
from alembic import context

from context_service.storage.engine import create_engine
from context_service.storage.tables import described_here, metadata

config = context.config


def _configure(**kwargs: Any) -> None:
    # render_as_batch: SQLite can only ALTER tables by copying them.
    # described_here: each backend's search index (FTS5 table, tsvector) is the
    # migration's own, outside the metadata.
    context.configure(target_metadata=metadata, render_as_batch=True, compare_type=True,
                      include_object=described_here, **kwargs)


def _run(connection: sa.Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("AGENTCTX_CONTEXT_DATABASE_URL")
    if not url:
        raise SystemExit("no database URL: pass -x url=... or set AGENTCTX_CONTEXT_DATABASE_URL")
    return url


async def _run_async() -> None:
    engine = create_engine(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    _run(config.attributes["connection"])
else:
    asyncio.run(_run_async())
