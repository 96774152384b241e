"""ports.ArtifactStore on the session store's engine (SQLite or
PostgreSQL): artifact bytes live in the database, next to the sessions.

A save streams its chunks into rows under an upload key of its own, one
short write transaction per CHUNKS_PER_WRITE chunks (no transaction stays
open while the client sends), then commits in one transaction: the blob is
stored already (the same bytes in the app: the staged rows are dropped and
its refcount grows) or a blob row naming the upload key as its chunk_key
is inserted (the chunk rows stay where they are); the version row is
inserted with the next version. A failed save drops its rows; a crashed
one leaves an upload row that ``collect_uploads`` deletes later. On
PostgreSQL commits of one artifact id (and, with a quota, of one app) take
a transaction-scoped advisory lock; two saves racing for the same new blob
conflict on its key and the commit retries.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.domain.artifacts import (
    ArtifactScope,
    ArtifactVersionRecord,
    ContentDigest,
    check_quota,
    next_version,
    not_found,
)
from context_service.domain.model import JsonObject
from context_service.storage.artifact_release import release_versions
from context_service.storage.tables import artifact_blobs, artifact_chunks, artifact_uploads, artifact_versions

if TYPE_CHECKING:
    from context_service.storage.sql_store import SqlSessionStore

_COMMIT_ATTEMPTS = 5
# Chunks written per transaction and read per query: at most this many MiB
# of one artifact held here at once (fewer transactions, fewer fsyncs).
CHUNKS_PER_WRITE = 2
CHUNKS_PER_READ = 4
_V = artifact_versions.c


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
    def __init__(self, store: SqlSessionStore) -> None:
        self._store = store

    # --- save ------------------------------------------------------------------

    async def save(
        self, scope: ArtifactScope, artifact: str, *, mime_type: str, text: bool, custom_metadata: JsonObject,
        chunks: AsyncIterable[bytes], digest: ContentDigest, quota_bytes: int, staged_call: str | None = None,
    ) -> ArtifactVersionRecord:
        upload = "u" + secrets.token_hex(16)
        try:
            count = 0
            group: list[bytes] = []
            async for chunk in chunks:
                group.append(chunk)
                if len(group) == CHUNKS_PER_WRITE:
                    await self._write_chunks(scope.app, upload, count, group)
                    count, group = count + len(group), []
            if group or not count:
                await self._write_chunks(scope.app, upload, count, group)
                count += len(group)
            sha = digest.finish()
            for attempt in range(_COMMIT_ATTEMPTS):
                try:
                    return await self._commit(scope, artifact, upload, sha=sha, size=digest.size, chunk_count=count,
                                              mime_type=mime_type, text=text, custom_metadata=custom_metadata,
                                              quota_bytes=quota_bytes, staged_call=staged_call)
                except IntegrityError:
                    # A concurrent save stored the same blob or took the version number.
                    if attempt == _COMMIT_ATTEMPTS - 1:
                        raise
            raise AssertionError("unreachable")
        except BaseException:
            await self._drop_upload(upload)
            raise

    async def _write_chunks(self, app: str, upload: str, first: int, group: list[bytes]) -> None:
        """One short write transaction; the first also lists the upload (so
        a crash leaves nothing the collector cannot find)."""
        async with self._store.write_transaction() as conn:
            if first == 0:
                await conn.execute(sa.insert(artifact_uploads).values(
                    upload_key=upload, app=app, create_time=self._store.now()
                ))
            if group:
                await conn.execute(sa.insert(artifact_chunks), [
                    {"app": app, "blob_key": upload, "chunk_index": first + i, "data": data}
                    for i, data in enumerate(group)
                ])

    async def _commit(
        self, scope: ArtifactScope, artifact: str, upload: str, *, sha: str, size: int, chunk_count: int,
        mime_type: str, text: bool, custom_metadata: JsonObject, quota_bytes: int, staged_call: str | None,
    ) -> ArtifactVersionRecord:
        b, c = artifact_blobs.c, artifact_chunks.c
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
            blob = (await conn.execute(
                sa.select(b.refcount).where(b.app == scope.app, b.sha256 == sha).with_for_update()
            )).first()
            if blob is not None:
                await conn.execute(sa.update(artifact_blobs).where(b.app == scope.app, b.sha256 == sha)
                                   .values(refcount=b.refcount + 1))
                await conn.execute(sa.delete(artifact_chunks).where(c.app == scope.app, c.blob_key == upload))
            else:
                used = (await conn.execute(
                    sa.select(sa.func.coalesce(sa.func.sum(b.size_bytes), 0)).where(b.app == scope.app)
                )).scalar_one()
                check_quota(int(used), size, quota_bytes)
                await conn.execute(sa.insert(artifact_blobs).values(
                    app=scope.app, sha256=sha, size_bytes=size, chunk_count=chunk_count, chunk_key=upload,
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
            await conn.execute(sa.delete(artifact_uploads).where(artifact_uploads.c.upload_key == upload))
        return ArtifactVersionRecord(
            scope=scope, artifact=artifact, version=version, mime_type=mime_type, size_bytes=size, sha256=sha,
            create_time=now, custom_metadata=custom_metadata, text=text,
        )

    async def _drop_upload(self, upload: str) -> None:
        async with self._store.write_transaction() as conn:
            await self._delete_uploads(conn, [upload])

    @staticmethod
    async def _delete_uploads(conn: AsyncConnection, uploads: list[str]) -> None:
        await conn.execute(sa.delete(artifact_chunks).where(artifact_chunks.c.blob_key.in_(uploads)))
        await conn.execute(sa.delete(artifact_uploads).where(artifact_uploads.c.upload_key.in_(uploads)))

    async def collect_uploads(self, older_than: dt.timedelta) -> int:
        cutoff = self._store.now() - older_than
        u = artifact_uploads.c
        async with self._store.read_connection() as conn:
            stale = list((await conn.execute(sa.select(u.upload_key).where(u.create_time < cutoff).limit(1000))).scalars())
        if stale:
            async with self._store.write_transaction() as conn:
                await self._delete_uploads(conn, stale)
        return len(stale)

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
        b, c = artifact_blobs.c, artifact_chunks.c
        app = record.scope.app
        async with self._store.read_connection() as conn:
            blob = (await conn.execute(
                sa.select(b.chunk_count, b.chunk_key).where(b.app == app, b.sha256 == record.sha256)
            )).first()
        if blob is None:
            raise not_found(record.scope, record.artifact, record.version)
        for first in range(0, int(blob.chunk_count), CHUNKS_PER_READ):
            last = min(first + CHUNKS_PER_READ, int(blob.chunk_count)) - 1
            # A few chunks per query, a connection per query: none is held
            # while the client reads.
            async with self._store.read_connection() as conn:
                rows = (await conn.execute(
                    sa.select(c.data).where(c.app == app, c.blob_key == blob.chunk_key,
                                            c.chunk_index.between(first, last)).order_by(c.chunk_index)
                )).all()
            if len(rows) != last - first + 1:
                raise not_found(record.scope, record.artifact, record.version)
            for row in rows:
                yield bytes(row.data)

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
        async with self._store.write_transaction() as conn:
            return await release_versions(conn, where)
