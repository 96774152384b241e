"""The retry loop: which failures are retried, how long to wait, and the
overall deadline that bounds every attempt and every wait."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from agentctx_client._config import RetryPolicy
from agentctx_client._errors import AgentCtxError, error_from_rpc

T = TypeVar("T")


def retryable(err: AgentCtxError) -> bool:
    """UNAVAILABLE, or RESOURCE_EXHAUSTED that the server says will pass."""
    if err.code is grpc.StatusCode.UNAVAILABLE:
        return True
    return err.code is grpc.StatusCode.RESOURCE_EXHAUSTED and err.retry_delay is not None


def backoff(policy: RetryPolicy, failures: int, err: AgentCtxError, rng: random.Random) -> float:
    """Seconds to wait after the ``failures``-th failed attempt: the
    server's RetryInfo delay, or jittered exponential backoff."""
    if err.retry_delay is not None:
        return err.retry_delay
    base = min(policy.max_backoff, policy.initial_backoff * policy.multiplier ** (failures - 1))
    return base * rng.uniform(1 - policy.jitter, 1)


class Deadline:
    """An overall deadline on the monotonic clock (None: no deadline)."""

    def __init__(self, timeout: float | None) -> None:
        self._at = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        return None if self._at is None else self._at - time.monotonic()

    def allows(self, wait: float) -> bool:
        """True when waiting ``wait`` seconds still leaves time for an attempt."""
        left = self.remaining()
        return left is None or wait < left


class Retrier:
    """Runs attempts of one idempotent call under a RetryPolicy."""

    def __init__(self, policy: RetryPolicy, *, rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.policy = policy
        self._rng = rng or random.Random()
        self._sleep = sleep

    async def run(self, attempt: Callable[[float | None], Awaitable[T]], deadline: Deadline) -> T:
        """``attempt(timeout)`` until it succeeds, fails for good, runs out
        of attempts or the deadline would pass during the next wait.
        ``attempt`` raises AgentCtxError (already decoded)."""
        failures = 0
        while True:
            try:
                return await attempt(deadline.remaining())
            except AgentCtxError as err:
                failures += 1
                if not retryable(err) or failures >= self.policy.max_attempts:
                    raise
                wait = backoff(self.policy, failures, err, self._rng)
                if not deadline.allows(wait):
                    raise
                await self._sleep(wait)
                left = deadline.remaining()
                if left is not None and left <= 0:
                    raise


class Calls:
    """Unary calls under the overall deadline (``timeout``, the call's own
    or the object's), with ``metadata`` sent along and failures decoded by
    error_from_rpc; retried by the RetryPolicy unless ``retry=False``.
    Shared by ContextClient and ToolContext."""

    timeout: float | None
    metadata: tuple[tuple[str, str], ...]
    _retrier: Retrier

    async def _call(self, rpc: Callable[..., Awaitable[T]], request: Any, timeout: float | None, *,
                    retry: bool = True) -> T:
        deadline = Deadline(self.timeout if timeout is None else timeout)

        async def attempt(left: float | None) -> T:
            try:
                return await rpc(request, timeout=left, metadata=self.metadata)
            except grpc.aio.AioRpcError as err:
                raise error_from_rpc(err) from None

        if not retry:
            return await attempt(deadline.remaining())
        return await self._retrier.run(attempt, deadline)
