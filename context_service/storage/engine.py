"""Async engines for SQLite (aiosqlite) and PostgreSQL (asyncpg), and the
mapping of driver failures to service errors.

SQLite: WAL, ``synchronous`` from settings (FULL: a commit is on disk when
it returns), a busy timeout, foreign keys on, and SQLAlchemy emitting BEGIN
itself so that write transactions start with BEGIN IMMEDIATE: they take the
write lock up front and cannot deadlock on a lock upgrade. The database holds
event content verbatim: its directory is made 0700 and the file 0600 (SQLite
gives its -wal and -shm files the database file's mode).
"""

from __future__ import annotations

import logging
import os
import pathlib
import sqlite3
from dataclasses import dataclass
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agentctx_common.errors import ConfigError, Unavailable
from agentctx_common.files import PRIVATE_DIR, make_dir
from agentctx_common.reasons import Reason

log = logging.getLogger("agentctx.storage")

# Execution option that makes a SQLite transaction BEGIN IMMEDIATE.
WRITE_OPTION = "agentctx_write"
# Whatever the server's default: a commit returns once it is on disk.
POSTGRES_SETTINGS = {"synchronous_commit": "on"}
# What a database call can fail with: through SQLAlchemy, or from a driver
# used directly (the append path), or the network underneath.
DRIVER_ERRORS = (DBAPIError, sqlite3.Error, asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


@dataclass(frozen=True)
class EngineOptions:
    sqlite_synchronous: str = "FULL"
    sqlite_busy_timeout_ms: int = 5000
    pool_size: int = 10
    connect_timeout_s: float = 10.0


def normalize_url(url: str) -> sa.URL:
    """The URL with its async driver: postgresql(+asyncpg) or sqlite(+aiosqlite)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError("database_url is not a valid SQLAlchemy URL") from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ConfigError("database_url: an in-memory SQLite database cannot be shared or kept; name a file")
        return parsed.set(drivername="sqlite+aiosqlite")
    raise ConfigError(f"database_url: unsupported database {backend!r}; use postgresql:// or sqlite:///FILE")


def describe(url: sa.URL) -> str:
    """The backend and database, never credentials or hosts: safe to log."""
    return f"{url.get_backend_name()}:{pathlib.PurePath(url.database or '').name}"


def create_engine(url: str | sa.URL, options: EngineOptions = EngineOptions()) -> AsyncEngine:
    url = normalize_url(str(url) if isinstance(url, str) else url.render_as_string(hide_password=False))
    if url.get_backend_name() == "sqlite":
        make_private(pathlib.Path(url.database or ""))
        engine = create_async_engine(
            url, pool_size=options.pool_size, max_overflow=0,
            connect_args={"timeout": options.sqlite_busy_timeout_ms / 1000},
        )
        _install_sqlite_hooks(engine, options)
        return engine
    return create_async_engine(
        url, pool_size=options.pool_size, max_overflow=options.pool_size, pool_pre_ping=True,
        connect_args={"timeout": options.connect_timeout_s, "server_settings": POSTGRES_SETTINGS},
    )


def make_private(database: pathlib.Path) -> None:
    """The SQLite file readable by this user only, before SQLite opens it: a
    new directory 0700, the file (created empty if missing) and any -wal and
    -shm files 0600. An existing directory is left as it is (it may be shared,
    like /tmp); the files in it are ours."""
    make_dir(database.parent, PRIVATE_DIR, tighten=False)  # new parents 0700 too, whatever the umask
    try:
        os.close(os.open(database, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise ConfigError(f"cannot open the SQLite database {database}: {exc.strerror}") from None
    for path in (database, database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")):
        try:
            if path.exists() and path.stat().st_mode & 0o077:
                path.chmod(0o600)
        except OSError as exc:
            # Not ours to change (another owner): say so once, keep serving.
            log.warning("cannot make the database file private", extra={"file": path.name, "error": exc.strerror})


def sqlite_pragmas(options: EngineOptions) -> tuple[str, ...]:
    """What every SQLite connection of ours runs first."""
    return (
        "PRAGMA journal_mode=WAL",
        f"PRAGMA synchronous={options.sqlite_synchronous}",
        f"PRAGMA busy_timeout={int(options.sqlite_busy_timeout_ms)}",
        "PRAGMA foreign_keys=ON",
    )


def _install_sqlite_hooks(engine: AsyncEngine, options: EngineOptions) -> None:
    pragmas = sqlite_pragmas(options)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN, below
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN")


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def unavailable(exc: BaseException) -> Unavailable:
    """A database failure as a retryable UNAVAILABLE, without its text (it
    can name hosts or values)."""
    text = str(getattr(exc, "orig", exc)).lower()
    if "locked" in text or "busy" in text:
        return Unavailable("the database is busy; retry", reason=Reason.DATABASE_BUSY, retry_after=0.2)
    return Unavailable(
        "the database is unavailable; retry",
        reason=Reason.DATABASE_UNAVAILABLE,
        retry_after=1.0,
        metadata={"error_type": type(getattr(exc, "orig", exc)).__name__},
    )
