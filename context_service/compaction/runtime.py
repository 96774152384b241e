"""Compaction's resources in a running context service: the service, its
compactors (with the remote channels and worker processes they hold) and
the background worker, on a storage backend's ports. ``build_server``
creates one and closes it on shutdown (worker first, then channels)."""

from __future__ import annotations

from dataclasses import dataclass

from context_service.cache_client import CacheClient
from context_service.compaction.compactors import ExtractiveCompactor
from context_service.compaction.model_compactor import ModelCompactor
from context_service.compaction.remote import RemoteCompactor
from context_service.compaction.service import CompactionService, Compactors
from context_service.compaction.worker import CompactionWorker
from context_service.domain.config import ContextConfig
from context_service.ports import CompactionJobs, CompactionStore, SessionStore
from context_service.settings import ContextSettings


@dataclass
class CompactionRuntime:
    service: CompactionService
    jobs: CompactionJobs
    worker: CompactionWorker | None
    remote: RemoteCompactor
    extractive: ExtractiveCompactor

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        await self.extractive.close()
        await self.remote.close()


def start_compaction(
    settings: ContextSettings,
    *,
    sessions: SessionStore,
    compactions: CompactionStore,
    jobs: CompactionJobs,
    defaults: ContextConfig,
    cache: CacheClient,
) -> CompactionRuntime:
    """Builds compaction on the given stores and starts its worker (when
    enabled). ``cache``: the cache-service client the MODEL compactor
    summarizes through (its owner closes it)."""
    remote = RemoteCompactor(settings)
    extractive = ExtractiveCompactor(settings.compaction_extractive_processes)
    worker: CompactionWorker | None = None
    service = CompactionService(
        sessions,
        compactions,
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
    return CompactionRuntime(service, jobs, worker, remote, extractive)
