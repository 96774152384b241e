"""One factory per storage backend, each returning the whole set of stores
the context service uses, behind the ports of ``context_service.ports``
(see docs/ARCHITECTURE.md, "Ports").

A new backend plugs in as one more opener here: a function from the
settings to a ``Backend`` whose members implement those ports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentctx_common.errors import ConfigError
from context_service.ports import (
    ArtifactStore,
    BlobStore,
    CompactionJobs,
    CompactionStore,
    LifecycleReader,
    MemoryStore,
    SessionHeads,
    SessionStore,
    ToolCalls,
)
from context_service.settings import ContextSettings
from context_service.storage.artifacts import SqlArtifactStore
from context_service.storage.compaction_jobs import SqlJobStore
from context_service.storage.compactions import SqlCompactionStore
from context_service.storage.engine import normalize_url
from context_service.storage.heads import SqliteSessionHeads, StoreSessionHeads
from context_service.storage.lifecycle import SqlLifecycleReader
from context_service.storage.memory_store import SqlMemoryStore
from context_service.storage.sql_store import SqlSessionStore, open_from_settings
from context_service.storage.tool_calls import SqlToolCalls


@dataclass
class Backend:
    sessions: SessionStore
    heads: SessionHeads
    lifecycle: LifecycleReader
    compactions: CompactionStore
    jobs: CompactionJobs
    artifacts: ArtifactStore
    memory: MemoryStore
    tool_calls: ToolCalls
    # Where artifact bytes live outside the database, when they do.
    objects: BlobStore | None = None

    async def close(self) -> None:
        if self.objects is not None:
            await self.objects.close()
        await self.heads.close()
        await self.sessions.close()


def sql_backend(store: SqlSessionStore, heads: SessionHeads, objects: BlobStore | None = None) -> Backend:
    """The SQL stores sharing ``store``'s engine, write lock and clock;
    artifact bytes in ``objects`` when given, else in the database."""
    return Backend(
        sessions=store,
        heads=heads,
        lifecycle=SqlLifecycleReader(store),
        compactions=SqlCompactionStore(store),
        jobs=SqlJobStore(store),
        artifacts=SqlArtifactStore(store, objects),
        memory=SqlMemoryStore(store),
        tool_calls=SqlToolCalls(store),
        objects=objects,
    )


def sqlite_backend(store: SqlSessionStore, path: str, objects: BlobStore | None = None) -> Backend:
    """``store`` on the SQLite file at ``path``: heads, and the store's
    event listings, read on the loop thread."""
    heads = SqliteSessionHeads(store, path)
    store.loop_reads = heads
    return sql_backend(store, heads, objects)


def postgres_backend(store: SqlSessionStore, objects: BlobStore | None = None) -> Backend:
    return sql_backend(store, StoreSessionHeads(store), objects)


async def open_objects(settings: ContextSettings) -> BlobStore | None:
    """The object store artifact_store_url names, or None (the database).
    Needs the ``s3`` extra (aiobotocore)."""
    if not settings.artifact_store_url:
        return None
    try:
        from context_service.storage.blobs_s3 import S3BlobStore
    except ImportError:
        raise ConfigError("artifact_store_url: an s3:// store needs aiobotocore (pip install 'agentctx[s3]')") from None
    return await S3BlobStore.open(settings)


async def _objects_for(store: SqlSessionStore, settings: ContextSettings) -> BlobStore | None:
    """open_objects, closing ``store`` when it fails."""
    try:
        return await open_objects(settings)
    except BaseException:
        await store.close()
        raise


async def open_sqlite(settings: ContextSettings) -> Backend:
    url = normalize_url(settings.resolved_database_url)
    store = await open_from_settings(settings)
    return sqlite_backend(store, url.database or "", await _objects_for(store, settings))


async def open_postgres(settings: ContextSettings) -> Backend:
    store = await open_from_settings(settings)
    return postgres_backend(store, await _objects_for(store, settings))


OPENERS: dict[str, Callable[[ContextSettings], Awaitable[Backend]]] = {
    "sqlite": open_sqlite,
    "postgresql": open_postgres,
}


async def open_backend(settings: ContextSettings) -> Backend:
    """The backend the settings' database URL names. Refuses (ConfigError)
    a database whose schema is not this code's."""
    backend = normalize_url(settings.resolved_database_url).get_backend_name()
    opener = OPENERS.get(backend)
    if opener is None:
        raise ConfigError(f"database_url: no storage backend for {backend!r}")
    return await opener(settings)
