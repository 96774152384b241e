"""A private PostgreSQL database per test run on 127.0.0.1:5432 (trust auth).

The conftest's databases are dropped when the session finishes
(``drop_created``, from ``pytest_sessionfinish``), outside any test's time
limit: dropping a few hundred databases on a loaded machine took longer
than the limit of the last test, whose teardown it used to be.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import uuid

ADMIN_DSN = os.environ.get("AGENTCTX_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/test")


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(ADMIN_DSN, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _run(sql: str) -> None:
    """Runs admin SQL on a loop of its own, in a thread when the caller is
    itself inside a running event loop (an async fixture)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_admin(sql))
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _admin(sql)).result()


def available() -> bool:
    try:
        _run("SELECT 1")
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False


def create_database() -> tuple[str, str]:
    """Creates a fresh database; returns (name, SQLAlchemy asyncpg URL)."""
    name = f"agentctx_t_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    _run(f'CREATE DATABASE "{name}"')
    base = ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    return name, f"{base}/{name}"


def drop_database(name: str) -> None:
    _run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_created: list[str] = []


def create_dropped_at_end() -> str:
    """A new database's URL; the database is dropped by ``drop_created``."""
    name, url = create_database()
    _created.append(name)
    return url


def drop_created() -> None:
    """Drops every database ``create_dropped_at_end`` made, on one connection."""
    if not _created:
        return
    names, _created[:] = list(_created), []

    async def drop() -> None:
        import asyncpg

        conn = await asyncpg.connect(ADMIN_DSN, timeout=10)
        try:
            for name in names:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())
