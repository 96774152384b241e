"""Schema versions: Alembic migrations, applied by ``agentctx db upgrade``,
and the start-up check that refuses a database older (or newer) than the
code.
"""

from __future__ import annotations

import enum
import pathlib
from dataclasses import dataclass

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from context_service.storage.engine import WRITE_OPTION

MIGRATIONS_DIR = pathlib.Path(__file__).with_name("migrations")
UPGRADE_COMMAND = "agentctx db upgrade"


class SchemaState(enum.Enum):
    CURRENT = "current"
    EMPTY = "empty"  # no tables at all: a brand-new database
    BEHIND = "behind"  # an older revision, or tables without a revision
    AHEAD = "ahead"  # a revision this code does not know (newer code wrote it)


@dataclass(frozen=True)
class SchemaStatus:
    state: SchemaState
    revision: str | None
    head: str


def alembic_config(url: str | None = None) -> Config:
    """A Config for our migrations. Without ``url`` the caller passes a
    connection in ``config.attributes["connection"]``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.attributes["url"] = url  # not a main option: '%' in passwords breaks ConfigParser
    return config


def head_revision() -> str:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"migrations must have one head, found {heads}"
    return heads[0]


def _status(conn: sa.Connection) -> SchemaStatus:
    head = head_revision()
    current = MigrationContext.configure(conn).get_current_revision()
    if current == head:
        return SchemaStatus(SchemaState.CURRENT, current, head)
    if current is None:
        tables = sa.inspect(conn).get_table_names()
        state = SchemaState.EMPTY if not tables else SchemaState.BEHIND
        return SchemaStatus(state, None, head)
    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    return SchemaStatus(SchemaState.BEHIND if current in known else SchemaState.AHEAD, current, head)


async def schema_status(engine: AsyncEngine) -> SchemaStatus:
    async with engine.connect() as conn:
        return await conn.run_sync(_status)


def _upgrade(conn: sa.Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, revision)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Applies migrations up to ``revision`` in one transaction."""
    async with engine.execution_options(**{WRITE_OPTION: True}).connect() as conn:
        await conn.run_sync(_upgrade, revision)
        await conn.commit()


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    def run(conn: sa.Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    async with engine.execution_options(**{WRITE_OPTION: True}).connect() as conn:
        await conn.run_sync(run)
        await conn.commit()
