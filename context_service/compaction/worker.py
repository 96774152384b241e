"""The background compaction worker: one per context-service process.

It claims durable jobs (any process's), runs each with the compaction
service while appends and BuildContext go on, and renews the job's lease
while it runs. A job whose process died is claimed again once its lease
expires. Stopping hands running jobs back (pending again) so another
process can take them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from typing import Protocol

from agentctx_common.errors import AgentCtxError, Code, NotFound
from context_service.compaction.service import CompactionOutcome
from context_service.domain.compaction_rules.jobs import Job
from context_service.domain.model import SessionKey
from context_service.ports import CompactionJobs

log = logging.getLogger("agentctx.compaction.worker")

# Purge finished job rows this old, checked every this many polls.
_PURGE_AFTER_S = 24 * 3600.0
_PURGE_EVERY = 600
# Errors a later attempt can fix: transient ones, and limits that say when
# to come back (RetryInfo). A summary too large stays too large.
_RETRYABLE = {Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED, Code.ABORTED}


def _retryable(exc: AgentCtxError) -> bool:
    return exc.code in _RETRYABLE or (exc.code is Code.RESOURCE_EXHAUSTED and exc.retry_after is not None)


class Runner(Protocol):
    async def run_background(self, key: SessionKey) -> CompactionOutcome: ...


class CompactionWorker:
    def __init__(
        self,
        jobs: CompactionJobs,
        runner: Runner,
        *,
        concurrency: int = 2,
        lease_s: float = 30.0,
        poll_s: float = 1.0,
        max_attempts: int = 3,
    ) -> None:
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._jobs = jobs
        self._runner = runner
        self._lease_s = lease_s
        self._poll_s = poll_s
        self._max_attempts = max_attempts
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._loop_task: asyncio.Task[None] | None = None
        self._running: dict[asyncio.Task[None], Job] = {}

    def wake(self) -> None:
        """A job was just enqueued here: look now rather than at the next poll."""
        self._wake.set()

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name="compaction-worker")

    async def stop(self) -> None:
        if self._loop_task is None:
            return
        self._loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._loop_task
        self._loop_task = None
        running = dict(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _loop(self) -> None:
        polls = 0
        while True:
            await self._slots.acquire()
            self._wake.clear()  # a wake-up from here on means "look again"
            try:
                job = await self._jobs.claim(self.owner, self._lease_s)
            except Exception as exc:  # noqa: BLE001 - keep polling; the database may come back
                log.warning("claim failed", extra={"reason": getattr(exc, "reason", type(exc).__name__)})
                job = None
            if job is None:
                self._slots.release()
                polls += 1
                if polls % _PURGE_EVERY == 0:
                    with contextlib.suppress(AgentCtxError):
                        await self._jobs.purge_finished(_PURGE_AFTER_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll_s)
                continue
            task = asyncio.get_running_loop().create_task(self._run(job), name=f"compaction-job-{job.job_id}")
            self._running[task] = job
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        self._slots.release()

    async def _run(self, job: Job) -> None:
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(job))
        try:
            outcome = await self._runner.run_background(job.key)
        except asyncio.CancelledError:
            heartbeat.cancel()
            with contextlib.suppress(Exception):
                await asyncio.shield(self._jobs.release(job, self.owner))
            raise
        except NotFound:
            await self._settle(heartbeat, self._jobs.finish(job, self.owner, "SESSION_NOT_FOUND"))
            return
        except AgentCtxError as exc:
            retry = _retryable(exc) and job.attempts < self._max_attempts
            delay = (exc.retry_after or 1.0) * 2 ** (job.attempts - 1) if retry else None
            log.warning("compaction job failed", extra={"reason": exc.reason, "attempts": job.attempts})
            await self._settle(heartbeat, self._jobs.fail(job, self.owner, exc.reason, retry_after_s=delay))
            return
        except Exception as exc:  # noqa: BLE001 - a job must never take the worker down
            log.error("compaction job crashed", extra={"error_type": type(exc).__name__})
            await self._settle(heartbeat, self._jobs.fail(job, self.owner, "INTERNAL", retry_after_s=None))
            return
        outcome_code = "COMMITTED" if outcome.compacted else outcome.skipped or "NOTHING"
        await self._settle(heartbeat, self._jobs.finish(job, self.owner, outcome_code))

    async def _settle(self, heartbeat: asyncio.Task[None], update: object) -> None:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
        try:
            await update  # type: ignore[misc]
        except AgentCtxError as exc:
            # The lease will expire and the job will be retried elsewhere.
            log.warning("could not record a job's end", extra={"reason": exc.reason})

    async def _heartbeat(self, job: Job) -> None:
        while True:
            await asyncio.sleep(self._lease_s / 3)
            try:
                if not await self._jobs.heartbeat(job, self.owner, self._lease_s):
                    return  # the lease was lost; the commit check keeps a second run harmless
            except AgentCtxError:
                continue
