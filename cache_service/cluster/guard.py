"""Every Redis step of the registry under a deadline, with one classified
failure (see docs/ARCHITECTURE.md, "Cache service").

``RegistryGuard.run`` gives a step ``timeout_s``; a step that times out or
meets a connection-level error (refused, reset, loading, read-only after a
failover, or an AttributeError or KeyError raised inside redis-py's cluster
client while its slot map is stale) raises ``RegistryUnavailable``. A connection error trips the
guard for ``retry_s``, and so does a timeout when no step succeeded for
``timeout_s`` (one slow step in a burst that others get through is a slow
step, not an outage): meanwhile every step fails at once (cause "tripped")
instead of each waiting out its own deadline, and when the interval is over
a single step probes Redis (the others keep failing fast until it answers).
The outage is logged once when it starts and once when Redis answers again,
without content. On a trip and on the way back the pool's idle
connections are closed, so no stale pooled connection outlives the outage
(the pool also health-checks a connection idle for a second:
cluster.client.redis_client). Other Redis errors (a script's own error, a
wrong type) are bugs and pass through unchanged.

``GuardedStore`` is the RegistryStore on Redis with every method run
through the guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from redis import cluster as redis_cluster
from redis import exceptions as rx
from redis.asyncio import cluster as redis_async_cluster

from cache_service.cluster.client import RedisClient, drop_idle_connections
from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.policy import Booking, Evidence
from cache_service.domain.ports import (
    EntryHolders,
    HitTerms,
    LossCredit,
    RegistryStore,
    RegistryUnavailable,
    TakenHit,
)

log = logging.getLogger("agentctx.cache.registry")
T = TypeVar("T")

# Errors that mean Redis cannot answer now, as opposed to a bug in a step.
# ReadOnlyError: a replica promoted or demoted under us; ConnectionError
# covers refused, reset, the pool's own wait, BusyLoadingError and a
# sentinel that knows no master; ClusterError, ClusterDownError,
# SlotNotCoveredError and TryAgainError a cluster between a master's failure
# and its replica's promotion.
_OUTAGE: tuple[type[BaseException], ...] = (rx.ConnectionError, rx.TimeoutError, rx.ReadOnlyError,
                                            rx.ClusterError, rx.ClusterDownError, rx.SlotNotCoveredError,
                                            rx.TryAgainError, rx.MasterDownError, OSError, TimeoutError)


# redis-py's cluster client can fail with a plain AttributeError or KeyError
# while its view of the slots is out of date in a failover (a node it looks
# up is gone: redis/redis-py#3835, #3815). Raised inside that module, such an
# error is the cluster moving, not a bug of the step; raised anywhere else
# it is a bug and passes through.
_CLUSTER_CLIENT = frozenset(str(pathlib.Path(m.__file__).resolve()) for m in (redis_cluster, redis_async_cluster)
                            if m.__file__)


def _raised_in_cluster_client(exc: BaseException) -> bool:
    if not isinstance(exc, (AttributeError, KeyError, IndexError, TypeError)) or exc.__traceback__ is None:
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    return str(pathlib.Path(frames[-1].filename).resolve()) in _CLUSTER_CLIENT


def outage_cause(exc: BaseException) -> str | None:
    """"timeout" or "connection" for an outage, None for anything else."""
    if isinstance(exc, RegistryUnavailable):
        return exc.cause
    if isinstance(exc, (rx.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, _OUTAGE) or _raised_in_cluster_client(exc):
        return "connection"
    return None


class RegistryGuard:
    def __init__(self, client: RedisClient | None, *, timeout_s: float, retry_s: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self._monotonic = monotonic
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._last_ok = monotonic()
        self._probing = False
        self.outages = 0  # how many times it tripped from up to down

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def check(self) -> None:
        """Raises RegistryUnavailable while tripped and another step probes."""
        if self._down_since is None:
            return
        if self._probing or self._monotonic() < self._retry_at:
            raise RegistryUnavailable("tripped", self.retry_s)

    async def run(self, step: Callable[[], Awaitable[T]], timeout_s: float | None = None) -> T:
        self.check()
        probe = self._down_since is not None
        if probe:
            self._probing = True
        try:
            async with asyncio.timeout(timeout_s if timeout_s is not None else self.timeout_s):
                result = await step()
        except BaseException as exc:
            cause = outage_cause(exc)
            if cause is None or isinstance(exc, RegistryUnavailable):
                raise
            if cause == "timeout" and not self.down and self._monotonic() - self._last_ok < self.timeout_s:
                raise RegistryUnavailable(cause, self.retry_s) from None
            raise self.failed(exc) from None
        finally:
            if probe:
                self._probing = False
        self.succeeded()
        return result

    def failed(self, exc: BaseException) -> RegistryUnavailable:
        """Records an outage seen outside ``run`` (a listener, a background
        loop) and returns the error to raise."""
        cause = outage_cause(exc) or "connection"
        now = self._monotonic()
        self._retry_at = now + self.retry_s
        if self._down_since is None:
            self._down_since = now
            self.outages += 1
            log.warning("registry unreachable; caching bypassed until it answers",
                        extra={"error_type": type(exc).__name__, "cause": cause})
            self._reset_pool()
        return RegistryUnavailable(cause, self.retry_s)

    def succeeded(self) -> None:
        self._last_ok = self._monotonic()
        if self._down_since is not None:
            log.warning("registry reachable again", extra={"down_s": round(self._monotonic() - self._down_since, 3)})
            self._down_since = None
            self._reset_pool()

    def _reset_pool(self) -> None:
        # Connections made before the outage may be half-open: none is reused.
        if self._client is None:
            return
        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(self._disconnect())
            _background.add(task)
            task.add_done_callback(_background.discard)

    async def _disconnect(self) -> None:
        assert self._client is not None
        await drop_idle_connections(self._client)


_background: set[asyncio.Task[None]] = set()


class GuardedStore:
    """The RegistryStore ``inner`` with every step under ``guard``."""

    def __init__(self, inner: RegistryStore, guard: RegistryGuard) -> None:
        self.inner = inner
        self._g = guard

    async def get(self, entry_id: str) -> Entry | None:
        return await self._g.run(lambda: self.inner.get(entry_id))

    async def first_match(self, scope_fp: str, keys: Sequence[EntryKey],
                          usable: Callable[[Entry], bool]) -> Entry | None:
        return await self._g.run(lambda: self.inner.first_match(scope_fp, keys, usable))

    async def match_and_record_sighting(self, scope_fp: str, keys: Sequence[EntryKey],
                                        usable: Callable[[Entry], bool], chain: Sequence[bytes], now: float,
                                        horizon_s: float, group: str = "",
                                        credit: LossCredit | None = None) -> tuple[Entry | None, Evidence, float | None]:
        return await self._g.run(lambda: self.inner.match_and_record_sighting(
            scope_fp, keys, usable, chain, now, horizon_s, group, credit))

    async def match_and_take_hit(self, scope_fp: str, keys: Sequence[EntryKey], usable: Callable[[Entry], bool],
                                 chain: Sequence[bytes], now: float, horizon_s: float, group: str, credit: LossCredit,
                                 hit: HitTerms) -> tuple[Entry | None, Evidence, float, TakenHit | None]:
        return await self._g.run(lambda: self.inner.match_and_take_hit(
            scope_fp, keys, usable, chain, now, horizon_s, group, credit, hit))

    async def scope_entries(self, scope_fp: str) -> list[Entry]:
        return await self._g.run(lambda: self.inner.scope_entries(scope_fp))

    async def all_entries(self) -> list[Entry]:
        return await self._g.run(self.inner.all_entries)

    async def count(self) -> int:
        return await self._g.run(self.inner.count)

    async def next_generation(self) -> int:
        return await self._g.run(self.inner.next_generation)

    async def put(self, entry: Entry) -> None:
        await self._g.run(lambda: self.inner.put(entry))

    async def retire(self, entry_id: str) -> Entry | None:
        return await self._g.run(lambda: self.inner.retire(entry_id))

    async def remove(self, entry_id: str, invalid_reason: str) -> Entry | None:
        return await self._g.run(lambda: self.inner.remove(entry_id, invalid_reason))

    async def tombstone(self, entry_id: str) -> str | None:
        return await self._g.run(lambda: self.inner.tombstone(entry_id))

    async def add_lease(self, entry_id: str, lease_id: str, expires: float, now: float) -> Entry | None:
        return await self._g.run(lambda: self.inner.add_lease(entry_id, lease_id, expires, now))

    async def lease_and_swap_holder(self, entry_id: str, lease_id: str, expires: float, now: float, scope_fp: str,
                                    holder: str, wall: float, keep_s: float) -> tuple[Entry | None, str]:
        return await self._g.run(lambda: self.inner.lease_and_swap_holder(
            entry_id, lease_id, expires, now, scope_fp, holder, wall, keep_s))

    async def drop_lease(self, entry_id: str, lease_id: str) -> Entry | None:
        return await self._g.run(lambda: self.inner.drop_lease(entry_id, lease_id))

    async def swap_holder(self, scope_fp: str, holder: str, entry_id: str, wall: float, keep_s: float) -> str:
        return await self._g.run(lambda: self.inner.swap_holder(scope_fp, holder, entry_id, wall, keep_s))

    async def holders(self, entry_id: str) -> EntryHolders:
        return await self._g.run(lambda: self.inner.holders(entry_id))

    async def drop_expired_leases(self, entry_id: str, wall: float) -> Entry | None:
        return await self._g.run(lambda: self.inner.drop_expired_leases(entry_id, wall))

    async def set_expiry(self, entry_id: str, expire_time: float) -> Entry | None:
        return await self._g.run(lambda: self.inner.set_expiry(entry_id, expire_time))

    async def least_recently_used_idle(self, wall: float) -> Entry | None:
        return await self._g.run(lambda: self.inner.least_recently_used_idle(wall))

    async def record_sighting(self, scope_fp: str, chain: Sequence[bytes], now: float,
                              horizon_s: float, group: str = "") -> Evidence:
        return await self._g.run(lambda: self.inner.record_sighting(scope_fp, chain, now, horizon_s, group))

    async def forget_sightings(self, scope_fp: str) -> None:
        await self._g.run(lambda: self.inner.forget_sightings(scope_fp))

    async def learned_floor(self, provider: str, model: str, now: float) -> int:
        return await self._g.run(lambda: self.inner.learned_floor(provider, model, now))

    async def learn_floor(self, provider: str, model: str, tokens: int, now: float, keep_s: float) -> None:
        await self._g.run(lambda: self.inner.learn_floor(provider, model, tokens, now, keep_s))

    async def lower_floor(self, provider: str, model: str, tokens: int, now: float) -> None:
        await self._g.run(lambda: self.inner.lower_floor(provider, model, tokens, now))

    async def report_create(self, entry_id: str) -> bool:
        return await self._g.run(lambda: self.inner.report_create(entry_id))

    async def book_loss(self, scope_fp: str, booking: Booking, opening: float, keep_s: float) -> float:
        return await self._g.run(lambda: self.inner.book_loss(scope_fp, booking, opening, keep_s))

    async def loss_balance(self, scope_fp: str, opening: float, keep_s: float, now: float) -> float:
        return await self._g.run(lambda: self.inner.loss_balance(scope_fp, opening, keep_s, now))
