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


class Trimmer:
    """Calls ``malloc_trim`` in a thread each time ``after_bytes`` of request
    bytes were released, and once more when the server falls idle: one trim
    at a time, and never on the event loop (a trim of a large heap takes
    milliseconds; ctypes releases the GIL for it)."""

    def __init__(self, after_bytes: int) -> None:
        self.after_bytes = after_bytes
        self.released = 0
        self.trims = 0
        self._running: asyncio.Task[None] | None = None

    def released_bytes(self, n: int) -> None:
        self.released += n
        if self.released >= self.after_bytes:
            self._start()

    def idle(self) -> None:
        """The server holds no RPC: give back what the last ones used."""
        if self.released:
            self._start()

    def _start(self) -> None:
        if _LIBC is None or self.after_bytes <= 0 or (self._running is not None and not self._running.done()):
            return
        self.released = 0
        self._running = asyncio.get_running_loop().create_task(self._trim())

    async def _trim(self) -> None:
        assert _LIBC is not None
        await asyncio.to_thread(_LIBC.malloc_trim, 0)
        self.trims += 1
