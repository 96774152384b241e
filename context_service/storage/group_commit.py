"""Group commit: concurrent appends of this process share one transaction.

A commit costs a disk flush (and on PostgreSQL a round trip) whether it
holds one row or a hundred, so one worker task takes everything queued,
runs it as one batch, and only then answers each caller: every answer is
still "on disk". If a batch fails as a whole, each of its items is retried
alone so that one bad item cannot fail the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from agentctx_common.errors import Unavailable
from agentctx_common.reasons import Reason

T = TypeVar("T")
R = TypeVar("R")
# A batch runner returns one result or error per item, in order.
BatchRunner = Callable[[Sequence[T]], Awaitable[Sequence["R | BaseException"]]]

log = logging.getLogger("agentctx.storage")


class GroupCommitter(Generic[T, R]):
    def __init__(self, run_batch: BatchRunner[T, R], *, max_batch: int = 256) -> None:
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._queue: asyncio.Queue[tuple[T, asyncio.Future[R]] | None] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    async def submit(self, item: T) -> R:
        """Runs ``item`` in the next batch; returns when that batch committed."""
        if self._closed:
            raise Unavailable("the service is shutting down", reason=Reason.SHUTTING_DOWN, retry_after=1.0)
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="group-commit")
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((item, future))
        # A cancelled caller cancels only its wait: a queued item still runs
        # and may commit, and a retry with the same event id finds it.
        return await future

    async def close(self) -> None:
        """Finishes what is queued, then stops the worker."""
        self._closed = True
        if self._worker is not None:
            self._queue.put_nowait(None)
            await self._worker
            self._worker = None

    async def _work(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                return
            # One more turn of the event loop lets requests that are already
            # in hand reach the queue: bigger batches, at no cost when idle.
            await asyncio.sleep(0)
            batch = [first]
            while len(batch) < self._max_batch and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stopping = True
                    break
                batch.append(nxt)
            await self._run(batch)

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run_batch([item for item, _ in batch])
        except Exception as exc:  # noqa: BLE001 - decided per item below
            if len(batch) == 1:
                results = [exc]
            else:
                log.warning("batch failed; retrying items alone", extra={"batch_size": len(batch), "error_type": type(exc).__name__})
                for entry in batch:
                    await self._run([entry])
                return
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
