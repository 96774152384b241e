"""ports.ArtifactStore on the session store's engine (SQLite or
PostgreSQL): versions, blobs and uploads in the database; the bytes in a
blob store (ports.BlobStore): the database's own chunk rows by default
(storage.blobs_db), or an S3-compatible object store (storage.blobs_s3).

A save is listed as an upload in ``artifact_uploads`` before any of its
bytes is written anywhere, then streams its chunks to the blob store under
an upload key of its own (no transaction stays open while the client
sends), then commits in one transaction that also removes the listing
(only if it is still there: an upload the collector took is ABORTED): the
blob is stored already (the same bytes in the app: its refcount grows and
the upload's bytes are dropped) or a blob row naming the upload key is
inserted (the bytes stay where they are, never rewritten); the version row
is inserted with the next version. A failed save drops its bytes and its
listing. A crashed one leaves the listing, which ``collect_uploads``
finds after the grace period: it turns it into a "released" listing ("r" +
key) in one transaction and deletes the bytes, then the listing. Bytes
outside the database that a delete releases are listed the same way in
the deleting transaction and deleted after it: at no point is there a
stored object the database does not list, nor a version without its
bytes. On PostgreSQL commits of one artifact id (and, with a quota, of one
app) take a transaction-scoped advisory lock; two saves racing for the
same new blob conflict on its key and the commit retries.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import secrets
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from agentctx_common.errors import Aborted, FailedPrecondition
from context_service.domain.artifacts import (
    ArtifactScope,
    ArtifactVersionRecord,
    ContentDigest,
    ScrubReport,
    check_quota,
    next_version,
    not_found,
)
from context_service.domain.model import JsonObject
from context_service.ports import BlobNotFound, BlobStore, BlobWriter
from context_service.storage.artifact_release import RELEASED, delete_chunks, list_released, release_versions
from context_service.storage.artifact_scrub import scrub_store
from context_service.storage.blobs_db import DbBlobStore
from context_service.storage.tables import artifact_blobs, artifact_uploads, artifact_versions

if TYPE_CHECKING:
    from context_service.storage.sql_store import SqlSessionStore

_COMMIT_ATTEMPTS = 5
_COLLECT_BATCH = 1000
_V = artifact_versions.c
_U = artifact_uploads.c
log = logging.getLogger("agentctx.context.artifacts")


def _scope_clause(scope: ArtifactScope) -> sa.ColumnElement[bool]:
    return sa.and_(_V.app == scope.app, _V.user_id == scope.user, _V.session_id == (scope.session or ""))


def _visible(call: str | None) -> sa.ColumnElement[bool]:
    """Versions a reader sees: the published ones, and those staged by the
    tool call ``call`` (its own writes)."""
    published = _V.staged_call.is_(None)
    return published if call is None else sa.or_(published, _V.staged_call == call)


def _record(row: Any, scope: ArtifactScope) -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        scope=scope, artifact=row.artifact, version=int(row.version), mime_type=row.mime_type,
        size_bytes=int(row.size_bytes), sha256=row.sha256, create_time=row.create_time,
        custom_metadata=json.loads(row.metadata_json), text=bool(row.is_text),
    )


def _lock_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts``."""
    digest = hashlib.sha256("\x00".join(("agentctx.artifacts", *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SqlArtifactStore:
    """``objects``: where new bytes go (None: the database). Bytes stay
    readable from the store that wrote them, told by their key's kind."""

    def __init__(self, store: SqlSessionStore, objects: BlobStore | None = None) -> None:
        self._store = store
        database: BlobStore = DbBlobStore(store)
        self.blobs: BlobStore = objects or database
        self._by_kind = {b.kind: b for b in (database, self.blobs)}

    def _blobs_of(self, key: str) -> BlobStore:
        blobs = self._by_kind.get(key[:1])
        if blobs is None:
            raise FailedPrecondition("the artifact's bytes are in an object store this service is not configured for")
        return blobs

    # --- save ------------------------------------------------------------------

    async def save(
        self, scope: ArtifactScope, artifact: str, *, mime_type: str, text: bool, custom_metadata: JsonObject,
        chunks: AsyncIterable[bytes], digest: ContentDigest, quota_bytes: int, staged_call: str | None = None,
    ) -> ArtifactVersionRecord:
        blobs = self.blobs
        upload = blobs.kind + secrets.token_hex(16)
        if not blobs.lists_uploads:
            async with self._store.write_transaction() as conn:
                await conn.execute(sa.insert(artifact_uploads).values(
                    upload_key=upload, app=scope.app, create_time=self._store.now()
                ))
        writer = blobs.writer(scope.app, upload)
        try:
            async for chunk in chunks:
                await writer.write(chunk)
            sha = digest.finish()
            parts = await writer.finish()
            for attempt in range(_COMMIT_ATTEMPTS):
                try:
                    record, stored = await self._commit(
                        scope, artifact, upload, sha=sha, size=digest.size, parts=parts, mime_type=mime_type,
                        text=text, custom_metadata=custom_metadata, quota_bytes=quota_bytes, staged_call=staged_call,
                    )
                    break
                except IntegrityError:
                    # A concurrent save stored the same blob or took the version number.
                    if attempt == _COMMIT_ATTEMPTS - 1:
                        raise
            else:
                raise AssertionError("unreachable")
        except BaseException:
            await self._abandon(blobs, writer, upload)
            raise
        if not stored:
            # The same bytes were stored already: this upload's are released.
            await self._discard(scope.app, upload)
        return record

    async def _abandon(self, blobs: BlobStore, writer: BlobWriter, upload: str) -> None:
        """A failed save's bytes and listing; if they cannot be dropped now
        the listing stays for the collector."""
        try:
            await writer.abort()
            if not blobs.lists_uploads:
                async with self._store.write_transaction() as conn:
                    await conn.execute(sa.delete(artifact_uploads).where(_U.upload_key == upload))
        except Exception:
            log.warning("a failed artifact upload is left for the collector", exc_info=True)

    async def _commit(
        self, scope: ArtifactScope, artifact: str, upload: str, *, sha: str, size: int, parts: int,
        mime_type: str, text: bool, custom_metadata: JsonObject, quota_bytes: int, staged_call: str | None,
    ) -> tuple[ArtifactVersionRecord, bool]:
        """The version, and whether the upload's bytes became its blob's
        (False: the blob was stored already; the upload's bytes are dropped,
        or listed as released when outside the database)."""
        b = artifact_blobs.c
        now = self._store.now()
        async with self._store.write_transaction() as conn:
            if conn.dialect.name == "postgresql":
                # Serializes commits of one artifact id (its next version) and,
                # with a quota, of one app (its byte count); SQLite commits one
                # at a time anyway. Always in this order: no lock cycle.
                keys = ([_lock_key("quota", scope.app)] if quota_bytes else []) + [
                    _lock_key("name", scope.app, scope.user, scope.session or "", artifact)
                ]
                for key in keys:
                    await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))
            listed = (await conn.execute(sa.delete(artifact_uploads).where(_U.upload_key == upload))).rowcount
            if listed != 1:
                raise Aborted("the upload took too long and was collected; save the artifact again")
            blob = (await conn.execute(
                sa.select(b.refcount).where(b.app == scope.app, b.sha256 == sha).with_for_update()
            )).first()
            stored = blob is None
            if blob is not None:
                await conn.execute(sa.update(artifact_blobs).where(b.app == scope.app, b.sha256 == sha)
                                   .values(refcount=b.refcount + 1))
                if self._blobs_of(upload).lists_uploads:
                    await delete_chunks(conn, [upload], scope.app)
                else:
                    await list_released(conn, scope.app, upload, now)
            else:
                used = (await conn.execute(
                    sa.select(sa.func.coalesce(sa.func.sum(b.size_bytes), 0)).where(b.app == scope.app)
                )).scalar_one()
                check_quota(int(used), size, quota_bytes)
                await conn.execute(sa.insert(artifact_blobs).values(
                    app=scope.app, sha256=sha, size_bytes=size, chunk_count=parts, chunk_key=upload,
                    refcount=1, create_time=now,
                ))
            latest = (await conn.execute(
                sa.select(sa.func.max(_V.version)).where(_scope_clause(scope), _V.artifact == artifact)
            )).scalar_one()
            version = next_version(None if latest is None else int(latest))
            values = {
                "app": scope.app, "user_id": scope.user, "session_id": scope.session or "", "artifact": artifact,
                "version": version, "mime_type": mime_type, "size_bytes": size, "sha256": sha, "is_text": text,
                "metadata_json": json.dumps(custom_metadata, separators=(",", ":"), sort_keys=True),
                "create_time": now, "staged_call": staged_call,
            }
            await conn.execute(sa.insert(artifact_versions).values(values))
        record = ArtifactVersionRecord(
            scope=scope, artifact=artifact, version=version, mime_type=mime_type, size_bytes=size, sha256=sha,
            create_time=now, custom_metadata=custom_metadata, text=text,
        )
        return record, stored

    async def _discard(self, app: str, key: str) -> bool:
        """Deletes released bytes (listed as RELEASED + key), then their
        listing; on failure both stay for the collector."""
        try:
            if self._blobs_of(key).lists_uploads:
                return True  # dropped in the releasing transaction
            await self._blobs_of(key).delete(app, key)
            async with self._store.write_transaction() as conn:
                await conn.execute(sa.delete(artifact_uploads).where(_U.upload_key == RELEASED + key))
        except Exception:
            log.warning("released artifact bytes are left for the collector", exc_info=True)
            return False
        return True

    async def collect_uploads(self, older_than: dt.timedelta) -> int:
        """Released bytes (at once) and uploads started before
        ``older_than`` ago and never committed (a crashed process's);
        returns how many were collected."""
        cutoff = self._store.now() - older_than
        async with self._store.read_connection() as conn:
            rows = (await conn.execute(
                sa.select(_U.upload_key, _U.app)
                .where(sa.or_(_U.upload_key.startswith(RELEASED), _U.create_time < cutoff)).limit(_COLLECT_BATCH)
            )).all()
        collected = 0
        for row in rows:
            key = row.upload_key.removeprefix(RELEASED)
            if key[:1] not in self._by_kind:
                continue  # bytes in an object store this service is not configured for
            if row.upload_key == key:
                # Taken from its save, which can no longer commit it.
                async with self._store.write_transaction() as conn:
                    taken = (await conn.execute(sa.delete(artifact_uploads).where(_U.upload_key == key))).rowcount
                    if not taken:
                        continue
                    if self._blobs_of(key).lists_uploads:
                        await delete_chunks(conn, [key], row.app)
                    else:
                        await list_released(conn, row.app, key, self._store.now())
            collected += await self._discard(row.app, key)
        return collected

    async def scrub(self, grace: dt.timedelta, *, dry_run: bool = False) -> list[ScrubReport]:
        """The database's chunk rows, then the object store when one is
        configured, each checked against the blobs and uploads
        (storage.artifact_scrub)."""
        return [await scrub_store(self._store, blobs, grace, dry_run=dry_run) for blobs in self._by_kind.values()]

    # --- read -------------------------------------------------------------------

    async def get_version(self, scope: ArtifactScope, artifact: str, version: int | None,
                          call: str | None = None) -> ArtifactVersionRecord:
        stmt = sa.select(artifact_versions).where(_scope_clause(scope), _V.artifact == artifact, _visible(call))
        stmt = stmt.where(_V.version == version) if version is not None else stmt.order_by(_V.version.desc()).limit(1)
        async with self._store.read_connection() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            raise not_found(scope, artifact, version)
        return _record(row, scope)

    async def read_chunks(self, record: ArtifactVersionRecord) -> AsyncIterator[bytes]:
        b = artifact_blobs.c
        app = record.scope.app
        async with self._store.read_connection() as conn:
            blob = (await conn.execute(
                sa.select(b.chunk_count, b.chunk_key).where(b.app == app, b.sha256 == record.sha256)
            )).first()
        if blob is None:
            raise not_found(record.scope, record.artifact, record.version)
        try:
            async for chunk in self._blobs_of(blob.chunk_key).read(app, blob.chunk_key, record.size_bytes,
                                                                   int(blob.chunk_count)):
                yield chunk
        except BlobNotFound:
            # Deleted while being read.
            raise not_found(record.scope, record.artifact, record.version) from None

    async def list_names(self, app: str, user: str, session: str | None, call: str | None = None) -> list[str]:
        sessions = [""] if session is None else ["", session]
        stmt = (sa.select(_V.artifact).distinct()
                .where(_V.app == app, _V.user_id == user, _V.session_id.in_(sessions), _visible(call))
                .order_by(_V.artifact))
        async with self._store.read_connection() as conn:
            return list((await conn.execute(stmt)).scalars())

    async def list_versions(self, scope: ArtifactScope, artifact: str,
                            call: str | None = None) -> list[ArtifactVersionRecord]:
        stmt = (sa.select(artifact_versions).where(_scope_clause(scope), _V.artifact == artifact, _visible(call))
                .order_by(_V.version))
        async with self._store.read_connection() as conn:
            return [_record(row, scope) for row in (await conn.execute(stmt)).all()]

    async def stored_bytes(self, app: str) -> tuple[int, int]:
        b = artifact_blobs.c
        stmt = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(b.size_bytes), 0)).where(b.app == app)
        async with self._store.read_connection() as conn:
            count, total = (await conn.execute(stmt)).one()
        return int(count), int(total)

    # --- delete -------------------------------------------------------------------

    async def delete(self, scope: ArtifactScope, artifact: str, version: int | None, call: str | None = None) -> int:
        where = sa.and_(_scope_clause(scope), _V.artifact == artifact, _visible(call))
        if version is not None:
            where = sa.and_(where, _V.version == version)
        released: list[tuple[str, str]] = []
        async with self._store.write_transaction() as conn:
            deleted = await release_versions(conn, where, released)
        for app, key in released:
            await self._discard(app, key)
        return deleted
