"""Compactors and the bounded way every one of them is run.

A compactor turns a ``SummaryRequest`` into a ``SummaryResult``. ``run``
puts it under the policy's deadline (and the caller's, when shorter),
checks the summary's bounds, and lets cancellation through: a cancelled
RPC or a stopping worker cancels the summarizer call itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.process
import contextlib
import logging
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from typing import Protocol

from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.extractive import Extractor, summarize_request
from context_service.domain.compaction_rules.policy import ResolvedPolicy
from context_service.domain.compaction_rules.summary import SummaryRequest, SummaryResult, validate_summary
from context_service.domain.model import SessionKey

# Extractive work between yields to the event loop, in input bytes: small
# enough that appends and BuildContext calls sharing the loop stay prompt.
_EXTRACT_SLICE_BYTES = 8 * 1024
# How long worker processes may take to start before the loop is used instead.
_POOL_START_S = 60.0

log = logging.getLogger("agentctx.compaction")


@dataclass(frozen=True, slots=True)
class CompactionCall:
    """Who is being compacted, for compactors that call out."""

    key: SessionKey
    model: str  # the summarizing model (MODEL compactor)
    deadline: float  # time.monotonic() by which the summary must be back

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class Compactor(Protocol):
    name: str

    async def summarize(self, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy) -> SummaryResult: ...


class ExtractiveCompactor:
    """Built in, deterministic, no model.

    With ``processes`` > 0 it runs in that many worker processes at a lower
    CPU priority, so summarizing never competes on equal terms with the
    RPCs this process serves; with 0 it runs on the event loop in slices.
    Either way a late result is dropped (the deadline is the caller's).
    """

    name = "extractive"

    def __init__(self, processes: int = 0) -> None:
        self._processes = processes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._warm = False

    async def ready(self) -> None:
        """Starts the worker processes, outside any summary's deadline (a
        process start under load can take seconds). If they cannot start,
        the compactor runs on the event loop instead."""
        if not self._processes or self._warm:
            return
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._get_pool().submit(_ping)), _POOL_START_S)
            self._warm = True
        except (TimeoutError, *_POOL_START_ERRORS) as exc:
            await self._run_in_loop_from_now(exc)

    async def _run_in_loop_from_now(self, exc: BaseException) -> None:
        log.warning("extractive worker processes did not start; running in the event loop",
                    extra={"error_type": type(exc).__name__})
        await self.close()
        self._processes = 0

    def _get_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            # spawn, never fork: this process runs gRPC threads.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self._processes, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker
            )
        return self._pool

    async def summarize(self, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy) -> SummaryResult:
        if self._processes:
            try:
                return SummaryResult(await self._in_process_pool(request))
            except _POOL_START_ERRORS as exc:
                await self._run_in_loop_from_now(exc)
        extractor = Extractor(request.previous_summary)
        budget = _EXTRACT_SLICE_BYTES
        sizes = request.event_sizes or (0,) * len(request.events)
        for event, size in zip(request.events, sizes, strict=False):
            extractor.add(event)
            budget -= size or 1024
            if budget <= 0:
                budget = _EXTRACT_SLICE_BYTES
                await asyncio.sleep(0)
        return SummaryResult(extractor.render(request.target_summary_bytes, request.max_summary_bytes))

    async def _in_process_pool(self, request: SummaryRequest) -> str:
        future = self._get_pool().submit(
            summarize_request, request.events, request.previous_summary,
            request.target_summary_bytes, request.max_summary_bytes,
        )
        try:
            return await asyncio.wrap_future(future)
        except concurrent.futures.process.BrokenProcessPool:
            self._pool, self._warm = None, False  # a worker died; the next compaction starts a new pool
            raise errors.failed(self.name, "WORKER_DIED") from None
        finally:
            future.cancel()  # no-op once running; drops it if the caller gave up first

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool, self._warm = None, False


# Starting spawn workers fails with RuntimeError when the embedding program's
# main module cannot be imported again (no ``if __name__ == "__main__"``).
_POOL_START_ERRORS = (OSError, RuntimeError, concurrent.futures.process.BrokenProcessPool)


def _ping() -> bool:
    return True


def _init_worker() -> None:
    # Ctrl-C reaches the whole process group; stopping a worker is its
    # parent's business (pool shutdown), never a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(10)


async def run(
    compactor: Compactor, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy
) -> SummaryResult:
    """The compactor's result, validated, or a structured error; never a
    half-made summary. Raises CancelledError when the caller is cancelled."""
    ready = getattr(compactor, "ready", None)
    if ready is not None:
        await ready()
    timeout = min(policy.timeout_s, call.remaining())
    if timeout <= 0:
        raise errors.timeout(compactor.name, policy.timeout_s)
    try:
        async with asyncio.timeout(timeout):
            result = await compactor.summarize(request, call, policy)
    except TimeoutError:
        raise errors.timeout(compactor.name, timeout) from None
    summary = validate_summary(result.summary, request.max_summary_bytes, compactor.name)
    return SummaryResult(summary, result.usage)
