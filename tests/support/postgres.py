"""A private PostgreSQL database per test run on 127.0.0.1:5432 (trust auth).

Every database this creates is dropped at the end of the session.
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
