"""CPU time (user + system) of processes, read from /proc, for benchmarks
that report the cost of a request per core next to wall-clock figures:
wall time on a shared machine follows its load, CPU time far less.

``cpu_s(pid)``: seconds a process and its live descendants (the workers of
``serve --workers N``) have run, from /proc/<pid>/stat (Linux; no psutil).
``Meter``: CPU deltas of some server processes and of this one (the
driver) over a block of calls. ``spread``: max over min of a figure's
samples across rounds, and ``SPREAD_LIMIT``, past which a ratio built on
that figure says more about the machine than about the code.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

TICKS = os.sysconf("SC_CLK_TCK")
# A baseline that varies more than this across rounds (max/min) makes a
# ratio against it meaningless: the machine, not the code, moved it.
SPREAD_LIMIT = 1.5


def _stat(pid: int) -> list[str] | None:
    try:
        raw = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces: fields after it start at ")".
    return raw[raw.rindex(")") + 2:].split()


def own_cpu_s(pid: int) -> float:
    """utime + stime of one process, in seconds (0 once it is gone)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / TICKS if fields else 0.0


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (/proc/<pid>/task/*/children is
    not built into every kernel)."""
    out: dict[int, int] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                out[int(entry.name)] = int(fields[1])
    return out


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its live descendants, in seconds."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += own_cpu_s(current)
        todo += children.get(current, [])
    return total


@dataclass
class Meter:
    """CPU seconds of ``pids`` (with descendants) and of this process over
    the calls between ``start()`` and ``stop()``."""

    pids: Sequence[int] = ()
    servers_s: float = 0.0
    driver_s: float = 0.0
    wall_s: float = 0.0
    _begin: tuple[float, float, float] = field(default=(0.0, 0.0, 0.0), repr=False)

    def _now(self) -> tuple[float, float, float]:
        return sum(cpu_s(p) for p in self.pids), time.process_time(), time.perf_counter()

    def start(self) -> Meter:
        self._begin = self._now()
        return self

    def stop(self) -> Meter:
        servers, driver, wall = self._now()
        self.servers_s = servers - self._begin[0]
        self.driver_s = driver - self._begin[1]
        self.wall_s = wall - self._begin[2]
        return self

    def per_call_ms(self, calls: int) -> dict[str, float]:
        return {"servers_cpu_ms": round(self.servers_s * 1e3 / calls, 4),
                "driver_cpu_ms": round(self.driver_s * 1e3 / calls, 4),
                "wall_ms": round(self.wall_s * 1e3 / calls, 4)}


def spread(samples: Iterable[float]) -> float:
    """Max over min of positive samples (1.0 for one sample)."""
    values = [s for s in samples if s > 0]
    return round(max(values) / min(values), 3) if values else 0.0


def meaningful(*spreads: float) -> bool:
    """Whether a ratio whose sides varied by ``spreads`` across rounds says
    something about the code."""
    return all(0 < s <= SPREAD_LIMIT for s in spreads)
