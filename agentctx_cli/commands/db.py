"""``agentctx db upgrade [--config FILE]``: apply the context service's
schema migrations to its database (SQLite file or PostgreSQL URL)."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from context_service.settings import ContextSettings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = sub.add_parser("db", help="the context service's database")
    db_sub = db.add_subparsers(dest="db_command", required=True, parser_class=type(db))
    upgrade = db_sub.add_parser("upgrade", help="apply schema migrations (safe to repeat)")
    upgrade.add_argument("--config", type=pathlib.Path, help="TOML config file (its [context] table)")
    upgrade.add_argument("--database-url", help="database URL (overrides config and environment)")
    upgrade.set_defaults(func=run_upgrade)


def run_upgrade(args: argparse.Namespace) -> int:
    from context_service.settings import ContextSettings

    # Listening and TLS settings do not matter to a migration; fixing them
    # here lets the command run from a database URL alone.
    overrides: dict[str, object] = {"dev_plaintext": True, "host": "127.0.0.1", "dev_anonymous_apps": []}
    if args.database_url:
        overrides["database_url"] = args.database_url
    settings = ContextSettings.load(args.config, **overrides)
    before, after = asyncio.run(_upgrade(settings))
    if before == after:
        print(f"database schema is current ({after})")
    else:
        print(f"database schema upgraded from {before or 'empty'} to {after}")
    return 0


async def _upgrade(settings: ContextSettings) -> tuple[str | None, str]:
    from agentctx_common.errors import ConfigError
    from context_service.storage import schema
    from context_service.storage.engine import DRIVER_ERRORS, create_engine, describe
    from context_service.storage.sql_store import engine_options

    engine = create_engine(settings.resolved_database_url, engine_options(settings))
    try:
        status = await schema.schema_status(engine)
        if status.state is schema.SchemaState.AHEAD:
            raise ConfigError(
                f"database schema revision {status.revision} is newer than this code ({status.head}); "
                "upgrade agentctx first"
            )
        await schema.upgrade(engine)
        return status.revision, status.head
    except DRIVER_ERRORS as exc:
        raise ConfigError(
            f"cannot upgrade database {describe(engine.url)}: {type(getattr(exc, 'orig', exc)).__name__}"
        ) from None
    finally:
        await engine.dispose()
