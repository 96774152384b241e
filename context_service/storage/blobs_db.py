"""ports.BlobStore in the database: artifact bytes in chunk rows
(``artifact_chunks``) next to the sessions, the embedded default.

An upload writes its chunks under its own key ("u" + 32 hex), a few per
short write transaction (no transaction stays open while the client
sends); the first of them also lists the upload in ``artifact_uploads``,
so a crash leaves nothing the collector cannot find. The artifact store's
commit then names the key as a blob's chunk_key (the rows are never
rewritten) or drops the rows in the same transaction. Each later write
first holds the listing (FOR SHARE) and stops (ABORTED) when the collector
took it, so every chunk row is named, in one transaction, by its blob or
its upload: the scrub (storage.artifact_scrub) finds unnamed rows only
where an older version or a hand left them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agentctx_common.errors import Aborted
from context_service.ports import BlobNotFound, StoredBytes
from context_service.storage.artifact_release import DB_KIND, delete_chunks
from context_service.storage.tables import artifact_chunks, artifact_uploads

if TYPE_CHECKING:
    from context_service.storage.sql_store import SqlSessionStore

# Chunks written per transaction and read per query: at most this many MiB
# of one artifact held here at once (fewer transactions, fewer fsyncs).
CHUNKS_PER_WRITE = 4
CHUNKS_PER_READ = 4
# (app, key) groups of chunk rows per listing query.
LIST_PAGE = 1000
_C = artifact_chunks.c
_U = artifact_uploads.c


class _DbWriter:
    def __init__(self, store: SqlSessionStore, app: str, key: str) -> None:
        self._store, self._app, self._key = store, app, key
        self._group: list[bytes] = []
        self._count = 0
        self._listed = False

    async def write(self, chunk: bytes) -> None:
        self._group.append(chunk)
        if len(self._group) == CHUNKS_PER_WRITE:
            await self._flush()

    async def finish(self) -> int:
        if self._group or not self._listed:
            await self._flush()
        return self._count

    async def _flush(self) -> None:
        group, self._group = self._group, []
        async with self._store.write_transaction() as conn:
            if not self._listed:
                await conn.execute(sa.insert(artifact_uploads).values(
                    upload_key=self._key, app=self._app, create_time=self._store.now()
                ))
            elif not (await conn.execute(
                sa.select(_U.upload_key).where(_U.upload_key == self._key).with_for_update(read=True)
            )).first():
                # The collector took the upload (past the grace period) and
                # deleted its rows: rows written now would be no one's.
                # Holding the listing (FOR SHARE) until this commits makes
                # the collector's delete wait and then see these rows.
                raise Aborted("the upload took too long and was collected; save the artifact again")
            if group:
                await conn.execute(sa.insert(artifact_chunks), [
                    {"app": self._app, "blob_key": self._key, "chunk_index": self._count + i, "data": data}
                    for i, data in enumerate(group)
                ])
        self._listed = True
        self._count += len(group)

    async def abort(self) -> None:
        """Drops the rows and the upload's listing."""
        self._group = []
        async with self._store.write_transaction() as conn:
            await delete_chunks(conn, [self._key], self._app)
            await conn.execute(sa.delete(artifact_uploads).where(artifact_uploads.c.upload_key == self._key))


class DbBlobStore:
    kind = DB_KIND
    lists_uploads = True

    def __init__(self, store: SqlSessionStore) -> None:
        self._store = store

    def writer(self, app: str, key: str) -> _DbWriter:
        return _DbWriter(self._store, app, key)

    async def read(self, app: str, key: str, size: int, parts: int) -> AsyncIterator[bytes]:
        del size
        for first in range(0, parts, CHUNKS_PER_READ):
            last = min(first + CHUNKS_PER_READ, parts) - 1
            # A few chunks per query, a connection per query: none is held
            # while the client reads.
            async with self._store.read_connection() as conn:
                rows = (await conn.execute(
                    sa.select(_C.data).where(_C.app == app, _C.blob_key == key, _C.chunk_index.between(first, last))
                    .order_by(_C.chunk_index)
                )).all()
            if len(rows) != last - first + 1:
                raise BlobNotFound()
            for row in rows:
                data = row.data
                yield data if isinstance(data, bytes) else bytes(data)

    async def delete(self, app: str, key: str) -> None:
        async with self._store.write_transaction() as conn:
            await delete_chunks(conn, [key], app)

    async def keys(self) -> list[tuple[str, str]]:
        async with self._store.read_connection() as conn:
            rows = (await conn.execute(sa.select(_C.app, _C.blob_key).distinct())).all()
        return [(row.app, row.blob_key) for row in rows]

    async def listing(self) -> AsyncIterator[list[StoredBytes]]:
        """The chunk rows grouped by (app, key), in that order, a page per
        query. Rows have no age (``modified`` None)."""
        after: tuple[str, str] | None = None
        while True:
            stmt = (sa.select(_C.app, _C.blob_key, sa.func.sum(sa.func.length(_C.data)).label("size"))
                    .group_by(_C.app, _C.blob_key).order_by(_C.app, _C.blob_key).limit(LIST_PAGE))
            if after is not None:
                stmt = stmt.where(sa.or_(_C.app > after[0], sa.and_(_C.app == after[0], _C.blob_key > after[1])))
            async with self._store.read_connection() as conn:
                rows = (await conn.execute(stmt)).all()
            if not rows:
                return
            yield [StoredBytes(row.app, row.blob_key, int(row.size or 0), None) for row in rows]
            after = (rows[-1].app, rows[-1].blob_key)

    async def exists(self, item: StoredBytes) -> bool:
        async with self._store.read_connection() as conn:
            row = (await conn.execute(
                sa.select(_C.chunk_index).where(_C.app == item.app, _C.blob_key == item.key).limit(1)
            )).first()
        return row is not None

    async def remove(self, item: StoredBytes) -> None:
        await self.delete(item.app, item.key)

    async def close(self) -> None:
        return None
