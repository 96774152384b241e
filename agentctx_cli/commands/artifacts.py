"""``agentctx artifacts scrub [--config FILE] [--dry-run] [--grace-s S]``:
check the context service's artifact bytes (the database's chunk rows and
the object store ``artifact_store_url`` names) against its database, as
the service does every ``artifact_scrub_interval_s``: delete the bytes
nothing names that are older than the grace period, and count the named
bytes the store lacks. Prints counts and sizes only, one line per store;
exits 1 when bytes are missing."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import pathlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from context_service.domain.artifacts import ScrubReport
    from context_service.settings import ContextSettings


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {text}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    artifacts = sub.add_parser("artifacts", help="the context service's artifact bytes")
    artifacts_sub = artifacts.add_subparsers(dest="artifacts_command", required=True, parser_class=type(artifacts))
    scrub = artifacts_sub.add_parser(
        "scrub", help="delete artifact bytes nothing names (older than the grace period), count missing ones",
    )
    scrub.add_argument("--config", type=pathlib.Path, help="TOML config file (its [context] table)")
    scrub.add_argument("--database-url", help="database URL (overrides config and environment)")
    scrub.add_argument("--dry-run", action="store_true", help="count only: delete nothing")
    scrub.add_argument("--grace-s", type=_seconds, help="grace period in seconds (default: artifact_scrub_grace_s)")
    scrub.set_defaults(func=run_scrub)


def run_scrub(args: argparse.Namespace) -> int:
    from context_service.settings import ContextSettings

    # Listening and TLS settings do not matter to a scrub (as to a migration).
    overrides: dict[str, object] = {"dev_plaintext": True, "host": "127.0.0.1", "dev_anonymous_apps": []}
    if args.database_url:
        overrides["database_url"] = args.database_url
    settings = ContextSettings.load(args.config, **overrides)
    grace = dt.timedelta(seconds=settings.artifact_scrub_grace_s if args.grace_s is None else args.grace_s)
    reports = asyncio.run(_scrub(settings, grace, dry_run=args.dry_run))
    for report in reports:
        print(render(report))
    return 1 if any(report.missing for report in reports) else 0


async def _scrub(settings: ContextSettings, grace: dt.timedelta, *, dry_run: bool) -> list[ScrubReport]:
    from context_service.storage.factory import open_backend

    backend = await open_backend(settings)
    try:
        return await backend.artifacts.scrub(grace, dry_run=dry_run)
    finally:
        await backend.close()


def render(report: ScrubReport) -> str:
    """One line of counts and sizes (never a key, an app or a bucket)."""
    deleted = "dry run, none deleted" if report.dry_run else f"{report.deleted} deleted ({report.deleted_bytes} B)"
    return (f"{report.store}: {report.checked} checked ({report.checked_bytes} B), "
            f"{report.orphaned} orphaned ({report.orphaned_bytes} B), {deleted}, "
            f"{report.young} unnamed within the grace period, {report.foreign} foreign, "
            f"{report.missing} missing ({report.missing_bytes} B)"
            + (f", {report.unversioned} blobs no version references ({report.unversioned_bytes} B)"
               if report.store == "database" else ""))
