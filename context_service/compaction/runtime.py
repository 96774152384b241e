"""Compaction's resources in a running context service: the service, its
compactors (with the cache-service client and remote channels they hold)
and the background worker. ``build_server`` creates one and closes it on
shutdown (worker first, then channels)."""

from __future__ import annotations

from dataclasses import dataclass

from context_service.cache_client import CacheClient
from context_service.compaction.compactors import ExtractiveCompactor
from context_service.compaction.model_compactor import ModelCompactor
from context_service.compaction.remote import RemoteCompactor
from context_service.compaction.service import CompactionService, Compactors
from context_service.compaction.worker import CompactionWorker
from context_service.domain.config import ContextConfig
from context_service.settings import ContextSettings
from context_service.storage.compaction_jobs import SqlJobStore
from context_service.storage.compactions import SqlCompactionStore
from context_service.storage.sql_store import SqlSessionStore


@dataclass
class CompactionRuntime:
    service: CompactionService
    jobs: SqlJobStore
    worker: CompactionWorker | None
    cache: CacheClient
    remote: RemoteCompactor
    extractive: ExtractiveCompactor

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        await self.extractive.close()
        await self.remote.close()
        await self.cache.close()


def start_compaction(
    settings: ContextSettings, store: SqlSessionStore, defaults: ContextConfig, cache: CacheClient | None = None
) -> CompactionRuntime:
    """Builds compaction on ``store`` and starts its worker (when enabled).
    ``cache``: a shared cache-service client, if the caller has one."""
    cache = cache or CacheClient(settings)
    remote = RemoteCompactor(settings)
    extractive = ExtractiveCompactor(settings.compaction_extractive_processes)
    jobs = SqlJobStore(store)
    worker: CompactionWorker | None = None
    service = CompactionService(
        store,
        SqlCompactionStore(store),
        Compactors(extractive=extractive, model=ModelCompactor(cache), remote=remote),
        jobs=jobs,
        defaults=defaults,
        default_model=settings.default_model,
    )
    if settings.compaction_worker:
        worker = CompactionWorker(
            jobs,
            service,
            concurrency=settings.compaction_worker_concurrency,
            lease_s=settings.compaction_job_lease_s,
            poll_s=settings.compaction_job_poll_s,
            max_attempts=settings.compaction_job_max_attempts,
        )
        service.on_enqueued = worker.wake
        worker.start()
    return CompactionRuntime(service, jobs, worker, cache, remote, extractive)
