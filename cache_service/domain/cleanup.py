"""Bounded cleanup: a fixed pool of workers that delete provider caches
(expired, evicted, invalidated, orphaned, replaced or missing) and extend
TTLs, each call under its own deadline.

A delete that the provider confirms, or that finds the cache already gone,
is recorded in the journal. A delete that keeps failing is retried a few
times and then left in the journal, so the next start deletes it; the
cache's TTL bounds it meanwhile. Only a confirmed outcome changes the
journal: a failed call never counts as a deletion.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry import metrics

from cache_service.domain.model import ResourceName
from cache_service.domain.ports import CacheNotFound, Journal, Provider, ProviderError, RefreshDone

log = logging.getLogger("agentctx.cache.cleanup")
_meter = metrics.get_meter("agentctx.cache")
_deletes = _meter.create_counter("agentctx.cache.deletes", description="Provider cache deletes by outcome.")


@dataclass(frozen=True)
class _Delete:
    provider: str
    entry_id: str
    name: ResourceName
    why: str


@dataclass(frozen=True)
class _Refresh:
    provider: str
    name: ResourceName
    ttl_s: float
    done: RefreshDone


class Janitor:
    """The Cleanup port (domain.ports)."""

    def __init__(
        self,
        providers: Mapping[str, Provider],
        journal: Journal,
        *,
        workers: int = 4,
        delete_timeout_s: float = 2.0,
        attempts: int = 3,
        backoff_s: float = 0.2,
    ) -> None:
        self._providers = providers
        self._journal = journal
        self._workers_n = workers
        self._timeout = delete_timeout_s
        self._attempts = attempts
        self._backoff = backoff_s
        self._queue: asyncio.Queue[_Delete | _Refresh | None] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = 0
        self.deleted = 0
        self.failed = 0

    def start(self) -> None:
        if not self._workers:
            self._workers = [asyncio.create_task(self._run(), name=f"cache-cleanup-{i}") for i in range(self._workers_n)]

    def delete(self, provider: str, entry_id: str, name: ResourceName, why: str) -> None:
        """Queues a delete; never blocks the caller."""
        self._put(_Delete(provider, entry_id, name, why))

    def refresh(self, provider: str, name: ResourceName, ttl_s: float, done: RefreshDone) -> None:
        self._put(_Refresh(provider, name, ttl_s, done))

    @property
    def pending(self) -> int:
        return self._queue.qsize() + self._busy

    async def drain(self) -> None:
        """Waits until every queued job has finished (tests, shutdown)."""
        while self.pending:
            self._idle.clear()
            await self._idle.wait()

    async def close(self, grace_s: float = 2.0) -> None:
        try:
            await asyncio.wait_for(self.drain(), grace_s)
        except TimeoutError:
            log.warning("cleanup left work for the next start", extra={"pending": self.pending})
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    def _put(self, job: _Delete | _Refresh) -> None:
        self._idle.clear()
        self._queue.put_nowait(job)

    async def _run(self) -> None:
        while True:
            job = await self._queue.get()
            self._busy += 1
            try:
                if isinstance(job, _Delete):
                    await self._delete(job)
                elif isinstance(job, _Refresh):
                    await self._refresh(job)
            except Exception as exc:  # noqa: BLE001 - a worker must survive any job
                log.error("cleanup job failed", extra={"error_type": type(exc).__name__})
            finally:
                self._busy -= 1
                if not self.pending:
                    self._idle.set()

    async def _delete(self, job: _Delete) -> None:
        provider = self._providers.get(job.provider)
        named = provider.named_caches if provider is not None else None
        if named is None:
            if provider is None:
                log.warning("cleanup skipped: provider not configured", extra={"provider": job.provider})
            # Marked and automatic prefixes hold no resource: nothing to delete.
            return
        for attempt in range(1, self._attempts + 1):
            try:
                async with asyncio.timeout(self._timeout):
                    await named.delete_cache(job.name)
                outcome = "deleted"
            except CacheNotFound:
                outcome = "already_gone"
            except (ProviderError, TimeoutError) as exc:
                log.info("cache delete failed", extra={"entry": job.entry_id, "attempt": attempt,
                                                        "error_type": type(exc).__name__})
                if attempt < self._attempts:
                    await asyncio.sleep(self._backoff * 2 ** (attempt - 1))
                continue
            await self._journal.deleted(job.entry_id)
            self.deleted += 1
            _deletes.add(1, {"provider": job.provider, "outcome": outcome, "why": job.why})
            log.info("cache deleted", extra={"entry": job.entry_id, "why": job.why, "outcome": outcome})
            return
        self.failed += 1
        _deletes.add(1, {"provider": job.provider, "outcome": "failed", "why": job.why})
        log.warning("cache delete left for the next start", extra={"entry": job.entry_id, "why": job.why})

    async def _refresh(self, job: _Refresh) -> None:
        provider = self._providers.get(job.provider)
        named = provider.named_caches if provider is not None else None
        if named is None:
            # A marked or automatic prefix is extended by its calls.
            await job.done(None, False)
            return
        try:
            async with asyncio.timeout(self._timeout):
                handle = await named.update_ttl(job.name, job.ttl_s)
        except CacheNotFound:
            await job.done(None, True)
            return
        except (ProviderError, TimeoutError) as exc:
            log.info("cache ttl refresh failed", extra={"error_type": type(exc).__name__})
            await job.done(None, False)
            return
        await job.done(handle, False)

