"""glibc malloc tuning, so memory a burst of large requests used goes back
to the system when the burst is over.

Without it a Python gRPC server that received a few hundred 8 MiB messages
kept gigabytes resident while idle: glibc raises its mmap threshold each
time a large mmapped block is freed (up to 32 MiB), so later 8 MiB buffers
come from the heap arenas, which fragment and are rarely returned; and every
thread that allocates (gRPC's I/O threads, the database driver's) may get an
arena of its own. A fixed threshold keeps large buffers in mmap (freed at
once), fewer arenas bound the fragmentation, and ``malloc_trim`` after large
requests hands free heap pages back.

Elsewhere than glibc (musl, macOS) these are no-ops.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from typing import Any

log = logging.getLogger("agentctx.memory")

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

MMAP_THRESHOLD_BYTES = 256 * 1024
TRIM_THRESHOLD_BYTES = 8 * 1024 * 1024
ARENA_MAX = 2


def _libc() -> Any | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()
_tuned = False


def tune_malloc() -> bool:
    """Sets glibc's mmap threshold, trim threshold and arena limit for this
    process (once; later calls do nothing). True when applied."""
    global _tuned
    if _LIBC is None or _tuned:
        return _tuned
    _tuned = True
    for param, value in (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        (_M_ARENA_MAX, ARENA_MAX),
    ):
        if not _LIBC.mallopt(param, value):
            log.warning("mallopt refused", extra={"param": param})
    return True


# An idle server trims at once only when this much request memory (or the
# whole ``after_bytes``, if smaller) was released since the last trim: one
# 8 MiB or four 256 KiB requests. Below it, as after each small call when
# calls come one at a time, a trim on every idle cost a sixth of a lease
# hit's CPU (bench.cpu: 3.45 CPU-ms with, 2.9 without) and a quarter of a
# 100-event BuildContext's (3.15, 2.4), and returned next to nothing; those
# bytes are trimmed at most once per ``IDLE_TRIM_DELAY_S`` instead.
IDLE_TRIM_BYTES = 1024 * 1024
IDLE_TRIM_DELAY_S = 5.0


class Trimmer:
    """Calls ``malloc_trim`` in a thread each time ``after_bytes`` of request
    bytes were released, when the server falls idle after at least
    ``idle_bytes`` (at most ``after_bytes``) were released, and
    ``idle_delay_s`` after it fell idle with less released, so every
    release is trimmed within that delay: one trim at a time, and never on
    the event loop (a trim of a large heap takes milliseconds; ctypes
    releases the GIL for it)."""

    def __init__(
        self, after_bytes: int, idle_bytes: int = IDLE_TRIM_BYTES, idle_delay_s: float = IDLE_TRIM_DELAY_S
    ) -> None:
        self.after_bytes = after_bytes
        self.idle_bytes = min(idle_bytes, after_bytes)
        self.idle_delay_s = idle_delay_s
        self.released = 0
        self.trims = 0
        self._running: asyncio.Task[None] | None = None
        self._later: asyncio.TimerHandle | None = None

    def released_bytes(self, n: int) -> None:
        self.released += n
        if self.released >= self.after_bytes:
            self._start()

    def idle(self) -> None:
        """The server holds no RPC: give back what the last ones used, at
        once if that was much, else after a delay (one timer at a time, so
        small calls one after the other cost a comparison each)."""
        if not self.released or (self.released >= self.idle_bytes and self._start()):
            return
        self._defer()

    def _defer(self) -> None:
        if self._later is None and _LIBC is not None and self.after_bytes > 0:
            self._later = asyncio.get_running_loop().call_later(self.idle_delay_s, self._deferred)

    def _deferred(self) -> None:
        # Whether or not calls are running now: the delay bounds how often
        # small releases are trimmed, and how long any stays untrimmed.
        self._later = None
        if self.released and not self._start():
            self._defer()

    def _start(self) -> bool:
        """Starts a trim unless one is running (or trims are off)."""
        if _LIBC is None or self.after_bytes <= 0 or (self._running is not None and not self._running.done()):
            return False
        self.released = 0
        self._running = asyncio.get_running_loop().create_task(self._trim())
        return True

    async def _trim(self) -> None:
        assert _LIBC is not None
        await asyncio.to_thread(_LIBC.malloc_trim, 0)
        self.trims += 1
