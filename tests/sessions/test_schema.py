"""Schema versions: `agentctx db upgrade`, the refusal to start on a schema
older or newer than the code, the embedded database made on first start,
and migrations that match the tables the code uses."""

from __future__ import annotations

import asyncio
import importlib
import pathlib
import pkgutil

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from agentctx_cli.main import main
from agentctx_common.errors import ConfigError
from context_service import storage
from context_service.server import build_server
from context_service.storage import schema
from context_service.storage.engine import create_engine
from context_service.storage.tables import described_here, metadata
from tests.sessions.helpers import migrate
from tests.support.servers import context_settings


def _all_tables() -> sa.MetaData:
    """The metadata with every table any storage module defines."""
    for module in pkgutil.iter_modules(storage.__path__, f"{storage.__name__}."):
        importlib.import_module(module.name)
    return metadata


async def _refusal(certs_dir: pathlib.Path, tmp_path: pathlib.Path, db_url: str) -> str:
    with pytest.raises(ConfigError) as info:
        await build_server(context_settings(certs_dir, tmp_path, database_url=db_url))
    return str(info.value)


async def _execute(db_url: str, *statements: str) -> None:
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.exec_driver_sql(statement)
    finally:
        await engine.dispose()


def test_db_upgrade_command_is_repeatable(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--database-url", db_url]) == 0
    assert "upgraded from empty to" in capsys.readouterr().out
    assert main(["db", "upgrade", "--database-url", db_url]) == 0
    assert "is current" in capsys.readouterr().out


def test_db_upgrade_reads_the_config_file(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "agentctx.toml"
    config.write_text(f'[context]\ndata_dir = "{tmp_path / "data"}"\ntls_cert = "/nonexistent.pem"\n')
    assert main(["db", "upgrade", "--config", str(config)]) == 0
    assert (tmp_path / "data" / "context.db").exists()


async def test_an_empty_configured_database_is_refused(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    message = await _refusal(certs_dir, tmp_path, db_url)
    assert "older than this code" in message and "agentctx db upgrade" in message
    assert "\n" not in message


async def test_a_schema_behind_the_code_is_refused(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    await migrate(db_url)
    engine = create_engine(db_url)
    try:
        await schema.downgrade(engine, "base")
    finally:
        await engine.dispose()
    assert "agentctx db upgrade" in await _refusal(certs_dir, tmp_path, db_url)
    # Tables without any recorded revision are not "empty" either.
    await _execute(db_url, "DROP TABLE alembic_version", "CREATE TABLE sessions (pk INTEGER PRIMARY KEY)")
    assert "agentctx db upgrade" in await _refusal(certs_dir, tmp_path, db_url)


async def test_a_schema_ahead_of_the_code_is_refused(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    await migrate(db_url)
    await _execute(db_url, "UPDATE alembic_version SET version_num = '9999_from_the_future'")
    assert "newer than this code" in await _refusal(certs_dir, tmp_path, db_url)
    code = await asyncio.to_thread(main, ["db", "upgrade", "--database-url", db_url])
    assert code == 2 and "newer than this code" in capsys.readouterr().err


async def test_the_embedded_database_is_created_on_first_start(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    settings = context_settings(certs_dir, tmp_path)
    assert settings.database_url is None
    server = await build_server(settings)
    await server.stop(0)
    assert (tmp_path / "context-data" / "context.db").exists()
    # Unless turned off.
    other = tmp_path / "fresh"
    with pytest.raises(ConfigError):
        await build_server(context_settings(certs_dir, other, db_create_if_empty=False))


async def test_migrations_match_the_tables_and_round_trip(db_url: str) -> None:
    await migrate(db_url)
    engine = create_engine(db_url)

    tables = _all_tables()

    def differences(conn: sa.Connection) -> list[object]:
        context = MigrationContext.configure(conn, opts={"include_object": described_here})
        return compare_metadata(context, tables)

    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(differences) == []
        await schema.downgrade(engine, "base")
        await schema.upgrade(engine)
        assert (await schema.schema_status(engine)).state is schema.SchemaState.CURRENT
    finally:
        await engine.dispose()
