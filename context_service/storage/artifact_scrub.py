"""The scrub: a blob store's contents checked against the database.
Stored bytes nothing names (an object a crash or a hand left behind, an
unfinished multipart upload no save will finish) are deleted once older
than the grace period; bytes a blob names that the store lacks are counted
and logged as a warning (never repaired: only a backup has them).

What names stored bytes: a blob row (``artifact_blobs.chunk_key``, refcount
at least one: the versions that reference it) or an upload listing
(``artifact_uploads``: a save in flight, or released bytes, "r" + key,
the collector deletes). How saves and deletes order their writes
(storage.artifacts, storage.artifact_release, storage.blobs_db):

- a save lists its upload before any byte of it is stored (the S3 store in
  a transaction of its own before the first request, the database store in
  the transaction of its first chunk rows), and its commit turns the
  listing into the blob row, or into a released listing when the app had
  the bytes already, in one transaction;
- a delete (a version, a session, a tool call's staged versions) lowers
  the refcount and deletes the blob row only at zero, listing the bytes as
  released in the same transaction; the bytes go after it commits;
- the collector turns an abandoned upload into a released listing in one
  transaction, then deletes the bytes, then the listing;
- keys are random (kind + 32 hex), written by one upload and never reused.

The invariant: **stored bytes are named from the moment they exist until
they are deleted, and a key nothing names is never named again.** So the
scrub lists the store first, then asks the database, for each page of the
listing, which of its keys are named, in one statement (one snapshot: the
commit that moves a key from the uploads to the blobs, or back, is never
half seen). What the listing showed existed then, so its listing was
committed before that; unnamed at the later read, it never will be again,
whether a version of the same content is being saved or not: content
addressing shares the blob row (its refcount grows), never a key. A save in
flight is named by its listing however long it runs; a save past
``artifact_upload_grace_s`` is the collector's, not the scrub's.

Bytes a commit, a delete or the collector unnames are deleted before the
key is unnamed (in the same transaction for chunk rows, before the listing
goes for objects), so an unnamed key whose bytes are still there after the
read (``exists``) is an orphan, and one whose bytes are gone is not
counted.

The grace period is a second guard for the object store: only objects and
uploads older than it (by the store's own modification time) are deleted,
so a writer of another version, a restore or a copy under way, and clocks
out of step by less than it, are left alone; younger ones are counted as
``young``. The database store has the same orphan possibility in
principle (chunk rows no blob and no upload names), but its writes cannot
make one: each chunk write holds its upload's listing and commits with it
(storage.blobs_db), so unnamed rows are an older version's or a hand's.
Chunk rows carry no time, so the grace period cannot apply to them; the
snapshot argument above is what makes deleting them safe.

Missing bytes are checked for blobs created before the grace period (and
never after the listing began): bytes a blob names were stored before its
commit and are deleted only after its row, so a blob the database still
has after the listing whose bytes the listing lacked had lost them (or a
replica's clock is behind by more than the grace period: a blob it
committed after the listing began looks older than it is). Empty blobs in
the database have no chunk rows to miss.

The database pass also counts blob rows no version references
(``unversioned``). None can arise: a commit inserts a version and raises
its blob's refcount in one transaction, every delete (a version, a
session, a tool call's staged versions: artifact_release) lowers it by the
versions it deletes in theirs and deletes the blob at zero. So one found
is a hand's or a bug's, and is reported, never deleted (a commit may be
about to reference it).

Only keys of the store's shape are touched; anything else under the
prefix is counted as ``foreign`` and left alone. The listing's pages keep
one app's finished bytes together (S3 lists in key order), so the missing
check holds one app's keys at a time. Logs and spans: counts and sizes
only, never keys, apps, buckets or endpoints.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import TYPE_CHECKING

import sqlalchemy as sa
from opentelemetry import trace

from context_service.domain.artifacts import ScrubReport
from context_service.ports import BlobStore, StoredBytes
from context_service.storage.artifact_release import DB_KIND, RELEASED
from context_service.storage.tables import artifact_blobs, artifact_uploads, artifact_versions

if TYPE_CHECKING:
    from context_service.storage.sql_store import SqlSessionStore

_B = artifact_blobs.c
_U = artifact_uploads.c
_HEX_KEY = r"[0-9a-f]{32}"
log = logging.getLogger("agentctx.context.artifacts.scrub")
_tracer = trace.get_tracer("agentctx.context.artifacts")


def store_name(blobs: BlobStore) -> str:
    return "database" if blobs.kind == DB_KIND else "s3"


class _Scrub:
    def __init__(self, store: SqlSessionStore, blobs: BlobStore, grace: dt.timedelta, report: ScrubReport) -> None:
        self._store, self._blobs, self.report = store, blobs, report
        # Taken before the listing: what it shows is at least this recent.
        started = store.now()
        self._cutoff = started - grace
        # Blobs committed after the listing began may have been written after it, whatever the grace.
        self._checked_before = min(started, self._cutoff)
        self._shape = re.compile(re.escape(blobs.kind) + _HEX_KEY)
        self._app: str | None = None
        self._present: set[str] = set()
        self._checked_apps: set[str] = set()

    async def page(self, page: list[StoredBytes]) -> None:
        report = self.report
        ours: list[StoredBytes] = []
        for item in page:
            report.checked += 1
            report.checked_bytes += item.size
            if not item.app or not self._shape.fullmatch(item.key):
                report.foreign += 1
                continue
            ours.append(item)
            if item.upload_id is None:
                if item.app != self._app:
                    await self.app_done()
                    self._app = item.app
                self._present.add(item.key)
        if not ours:
            return
        named = await self._named(ours)
        for item in ours:
            if (item.app, item.key) in named:
                continue
            if item.modified is not None and item.modified > self._cutoff:
                report.young += 1
                continue
            if not await self._blobs.exists(item):
                continue  # deleted by its own path (a commit, a release) since the listing
            report.orphaned += 1
            report.orphaned_bytes += item.size
            if not report.dry_run:
                await self._blobs.remove(item)
                report.deleted += 1
                report.deleted_bytes += item.size

    async def _named(self, items: list[StoredBytes]) -> set[tuple[str, str]]:
        """(app, key) of ``items`` a blob or an upload listing names, read
        in one statement (one snapshot)."""
        keys = sorted({item.key for item in items})
        stmt = sa.union_all(
            sa.select(_B.app, _B.chunk_key.label("key")).where(_B.chunk_key.in_(keys)),
            sa.select(_U.app, _U.upload_key.label("key")).where(
                _U.upload_key.in_(keys + [RELEASED + key for key in keys])
            ),
        )
        async with self._store.read_connection() as conn:
            rows = (await conn.execute(stmt)).all()
        return {(row.app, row.key.removeprefix(RELEASED)) for row in rows}

    def _blobs_of_kind(self) -> sa.ColumnElement[bool]:
        """Blobs whose bytes this store should have, old enough to check
        (an empty blob in the database has no chunk rows)."""
        return sa.and_(_B.chunk_key.startswith(self._blobs.kind), _B.create_time < self._checked_before,
                       _B.chunk_count > 0)

    async def app_done(self) -> None:
        """The missing check of the app whose finished bytes were just listed."""
        if self._app is None:
            return
        app, present = self._app, self._present
        self._app, self._present = None, set()
        self._checked_apps.add(app)
        async with self._store.read_connection() as conn:
            rows = (await conn.execute(
                sa.select(_B.chunk_key, _B.size_bytes).where(_B.app == app, self._blobs_of_kind())
            )).all()
        for row in rows:
            if row.chunk_key not in present:
                self.report.missing += 1
                self.report.missing_bytes += int(row.size_bytes)

    async def finish(self) -> None:
        """The last app's missing check, then the apps the store holds nothing of."""
        await self.app_done()
        async with self._store.read_connection() as conn:
            rows = (await conn.execute(
                sa.select(_B.app, sa.func.count(), sa.func.coalesce(sa.func.sum(_B.size_bytes), 0))
                .where(self._blobs_of_kind()).group_by(_B.app)
            )).all()
        for app, count, size in rows:
            if app not in self._checked_apps:
                self.report.missing += int(count)
                self.report.missing_bytes += int(size)


async def _unversioned(store: SqlSessionStore, report: ScrubReport) -> None:
    """Blob rows no version references (``ScrubReport.unversioned``), in
    one statement: a commit inserts the blob and its version together, a
    release deletes them together, so none is ever half seen."""
    v = artifact_versions.c
    referenced = sa.select(v.app, v.sha256).distinct().subquery()
    stmt = (sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(_B.size_bytes), 0))
            .select_from(artifact_blobs.outerjoin(referenced, sa.and_(referenced.c.app == _B.app,
                                                                      referenced.c.sha256 == _B.sha256)))
            .where(referenced.c.app.is_(None)))
    async with store.read_connection() as conn:
        count, size = (await conn.execute(stmt)).one()
    report.unversioned, report.unversioned_bytes = int(count), int(size)


async def scrub_store(store: SqlSessionStore, blobs: BlobStore, grace: dt.timedelta, *,
                      dry_run: bool) -> ScrubReport:
    """Scrubs ``blobs`` against ``store``'s database (see the module)."""
    report = ScrubReport(store=store_name(blobs), dry_run=dry_run)
    with _tracer.start_as_current_span("artifacts.scrub") as span:
        scrub = _Scrub(store, blobs, grace, report)
        async for page in blobs.listing():
            await scrub.page(page)
        await scrub.finish()
        if blobs.kind == DB_KIND:
            await _unversioned(store, report)
        counts = report.counts()
        span.set_attributes({"artifact.store": report.store, "artifact.dry_run": dry_run,
                             **{f"artifact.scrub.{k}": v for k, v in counts.items()}})
    extra = {"store": report.store, "dry_run": dry_run, **counts}
    if report.missing:
        log.warning("artifact scrub: bytes the database names are missing from the store", extra=extra)
    elif report.unversioned:
        log.warning("artifact scrub: blobs no version references", extra=extra)
    else:
        log.info("artifact scrub", extra=extra)
    return report
