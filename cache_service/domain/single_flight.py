"""Single flight: concurrent misses for one key join one create (see
docs/ARCHITECTURE.md, "Cache service").

``LocalSingleFlight`` is the SingleFlight port for one process: the table of
in-flight creates by scope and key. The coordinator shared by replicas
(cache_service.cluster.single_flight) keeps this table for its own waiters
and adds a lock per key (taken in ``begin``, let go in ``end``).

Each waiter has an absolute deadline. ``wait`` returns when the create's
outcome is handed over or the deadline passes; ``split_late`` rechecks every
waiter against the clock *at the moment* the create finished (a result that
arrived in time but is handled late still counts as late).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from cache_service.domain.entry import EntryKey
from cache_service.domain.failures import Outcome
from cache_service.domain.flight import Claim, Flight, Waiter
from cache_service.domain.ports import Clock


class LocalSingleFlight:
    def __init__(self) -> None:
        self._scopes: dict[str, dict[EntryKey, Flight]] = {}
        self._count = 0

    def find(self, scope_fp: str, key: EntryKey) -> Flight | None:
        table = self._scopes.get(scope_fp)
        return table.get(key) if table is not None else None

    async def begin(self, flight: Flight) -> Claim:
        return Claim.WON if self.add(flight) else Claim.TAKEN

    async def end(self, flight: Flight) -> None:
        self.discard(flight)

    async def wait_remote(self, scope_fp: str, key: EntryKey, timeout_s: float) -> str | None:
        return ""  # no other replica: nothing to wait for

    async def invalidated(self, scope_fp: str) -> None:
        return None

    def on_invalidated(self, cancel: Callable[[str], Awaitable[None]]) -> None:
        return None

    def add(self, flight: Flight) -> bool:
        table = self._scopes.setdefault(flight.scope_fp, {})
        if flight.key in table:
            return False
        table[flight.key] = flight
        self._count += 1
        return True

    def discard(self, flight: Flight) -> None:
        table = self._scopes.get(flight.scope_fp)
        if table is not None and table.get(flight.key) is flight:
            del table[flight.key]
            self._count -= 1
            if not table:
                del self._scopes[flight.scope_fp]

    def in_scope(self, scope_fp: str) -> list[Flight]:
        return list(self._scopes.get(scope_fp, {}).values())

    def count(self) -> int:
        return self._count


def join(flight: Flight, deadline: float) -> Waiter:
    waiter = Waiter(deadline, asyncio.get_running_loop().create_future())
    flight.waiters.append(waiter)
    return waiter


async def wait(waiter: Waiter, clock: Clock, late: Callable[[], Outcome]) -> Outcome:
    """The outcome handed to ``waiter``, or ``late()`` at its deadline."""
    try:
        async with asyncio.timeout(max(0.0, waiter.deadline - clock.monotonic())):
            return await asyncio.shield(waiter.future)
    except TimeoutError:
        waiter.gone = True
        if waiter.future.done():
            return waiter.future.result()
        return late()
    except asyncio.CancelledError:
        waiter.gone = True
        raise


def split_late(flight: Flight, now: float, late: Callable[[], Outcome]) -> list[Waiter]:
    """Hands ``late()`` to every waiter past its deadline at ``now``; returns
    the waiters still waiting, in arrival order."""
    live: list[Waiter] = []
    for waiter in flight.waiters:
        if waiter.gone or waiter.future.done():
            continue
        if waiter.deadline <= now:
            waiter.gone = True
            waiter.future.set_result(late())
            continue
        live.append(waiter)
    return live


def hand_over(flight: Flight, outcome: Callable[[], Outcome]) -> None:
    """Gives every waiter not yet answered the result of ``outcome()``."""
    for waiter in flight.waiters:
        if not waiter.future.done():
            waiter.future.set_result(outcome())
