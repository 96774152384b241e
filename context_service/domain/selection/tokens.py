"""Token estimates: bytes / bytes_per_token, rounded up, optionally
calibrated by the provider's real prompt token counts.

Calibration reads the differences between consecutive model replies that
carry usage: between two replies the prompt grew by the events stored in
between, so the constant part of every request (system instruction, tools,
framing) cancels out. The ratio is clamped to a plausible range so one odd
reading cannot make estimates absurd.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from context_service.domain.selection.records import EventRecord

DEFAULT_BYTES_PER_TOKEN = 4.0
MIN_CALIBRATED_BPT = 1.0
MAX_CALIBRATED_BPT = 16.0
# Replies looked at: the newest few describe the current mix of content.
CALIBRATION_REPLIES = 4


def estimate(size: int, bytes_per_token: float) -> int:
    return math.ceil(size / bytes_per_token) if size > 0 else 0


def byte_allowance(max_bytes: int | None, max_tokens: int | None, bytes_per_token: float) -> int | None:
    """The largest byte count that respects both limits, or None when
    neither is set. Exact for the rounding ``estimate`` uses."""
    limits = []
    if max_bytes is not None:
        limits.append(max_bytes)
    if max_tokens is not None:
        product = max_tokens * bytes_per_token
        b = math.floor(product) if product < 2**62 else 2**62
        # Float rounding leaves b at most a step or two off; the bound keeps
        # a value validation did not anticipate from spinning here.
        for _ in range(64):
            if b > 0 and estimate(b, bytes_per_token) > max_tokens:
                b -= 1
            elif estimate(b + 1, bytes_per_token) <= max_tokens:
                b += 1
            else:
                break
        limits.append(b)
    return min(limits) if limits else None


def calibrate(window: Sequence[EventRecord], start: int) -> float | None:
    """Observed bytes per token over ``window[start:]``, or None when fewer
    than two replies with usage are there. Linear in the distance from the
    end to the oldest reply used."""
    points: list[tuple[int, int]] = []  # (index, prompt_tokens), newest first
    for i in range(len(window) - 1, start - 1, -1):
        r = window[i]
        if r.prompt_tokens > 0 and not r.is_compaction:
            points.append((i, r.prompt_tokens))
            if len(points) == CALIBRATION_REPLIES:
                break
    if len(points) < 2:
        return None
    newest, oldest = points[0], points[-1]
    grown_tokens = newest[1] - oldest[1]
    grown_bytes = sum(
        r.body.size for r in window[oldest[0]:newest[0]] if r.body is not None and not r.is_compaction and not r.partial
    )
    if grown_tokens <= 0 or grown_bytes <= 0:
        return None
    return min(MAX_CALIBRATED_BPT, max(MIN_CALIBRATED_BPT, grown_bytes / grown_tokens))
