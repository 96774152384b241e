"""Time, injectable: a monotonic clock for deadlines and a wall clock for
expiry times. Tests and benchmarks use ``ManualClock`` to force orderings
(for example a create result that arrives before a deadline but is handled
after it) without sleeping. Both implement domain.ports.Clock."""

from __future__ import annotations

import time


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to; both readings move together."""

    def __init__(self, start_wall: float = 1_800_000_000.0) -> None:
        self._mono = 1000.0
        self._wall = start_wall

    def monotonic(self) -> float:
        return self._mono

    def wall(self) -> float:
        return self._wall

    def advance(self, seconds: float) -> None:
        self._mono += seconds
        self._wall += seconds
