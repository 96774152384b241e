"""A private PostgreSQL database per test run on 127.0.0.1:5432 (trust auth).

Every database this creates is dropped at the end of the session.
"""

from __future__ import annotations

import asyncio
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


def available() -> bool:
    try:
        asyncio.run(_admin("SELECT 1"))
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False


def create_database() -> tuple[str, str]:
    """Creates a fresh database; returns (name, SQLAlchemy asyncpg URL)."""
    name = f"agentctx_t_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    base = ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    return name, f"{base}/{name}"


def drop_database(name: str) -> None:
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
