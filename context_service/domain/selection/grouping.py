"""The filtered, unit-grouped history of one window, with its canonical
bytes laid out once.

Building it touches every visible event; everything after (budgets, the
fingerprints) works on units or on contiguous byte ranges. A caller that
keeps a history between requests (``building.history``) passes a
memo dict, so a warm request with the same filter skips the per-event work:
the memo must be emptied whenever the history changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context_service.domain.config import EventFilter
from context_service.domain.selection.filters import predicate
from context_service.domain.selection.records import EventRecord
from context_service.domain.selection.units import Units, group

_DEFAULT_FILTER = EventFilter()
MEMO_LIMIT = 32


class Grouping:
    __slots__ = ("_digests", "_joined", "_offsets", "_pruned", "filtered", "seen", "total", "units")

    def __init__(self, seen: int, filtered: int, units: Units) -> None:
        self.seen = seen
        self.filtered = filtered + units.orphan_responses
        self.units = units
        self.total = sum(units.sizes)
        self._joined: bytes | None = None
        self._offsets: list[int] = []
        self._digests = b""
        self._pruned: list[int] = []

    def _layout(self) -> None:
        canonical = [b.canonical for b in self.units.bodies]
        offsets, at = [], 0
        for c in canonical:
            offsets.append(at)
            at += len(c) + 1
        self._offsets = offsets
        self._digests = b"".join([b.digest for b in self.units.bodies])
        pruned, running = [0] * (len(canonical) + 1), 0
        for i in range(len(canonical) - 1, -1, -1):
            running += self.units.bodies[i].secrets_pruned
            pruned[i] = running
        self._pruned = pruned
        self._joined = b",".join(canonical)

    def joined_from(self, position: int) -> memoryview | bytes:
        """Comma-joined canonical JSON of ``events[position:]``."""
        if self._joined is None:
            self._layout()
        assert self._joined is not None
        if position >= len(self._offsets):
            return b""
        return memoryview(self._joined)[self._offsets[position]:]

    def pruned_from(self, position: int) -> int:
        """Secret keys pruned from ``events[position:]``."""
        if self._joined is None:
            self._layout()
        return self._pruned[min(position, len(self._pruned) - 1)]

    def digests_from(self, position: int) -> memoryview | bytes:
        """Concatenated SHA-256 digests of ``events[position:]``."""
        if self._joined is None:
            self._layout()
        return memoryview(self._digests)[32 * position:]


def grouping(
    records: Sequence[EventRecord],
    start: int,
    event_filter: EventFilter | None,
    input_ids: tuple[str, ...],
    memo: dict[Any, Any] | None = None,
) -> Grouping:
    """Visible events from ``records[start:]`` (compaction entries left
    out), filtered and grouped into units."""
    slot = (start, event_filter, input_ids)
    if memo is not None:
        hit: Grouping | None = memo.get(slot)
        if hit is not None:
            return hit
    window = [r for r in (records[start:] if start else records) if not r.is_compaction]
    if event_filter is None or event_filter == _DEFAULT_FILTER:
        # The common case, without a call per event.
        candidates = [r for r in window if not r.partial and r.body is not None]
    else:
        keep = predicate(event_filter)
        candidates = [r for r in window if r.body is not None and keep(r)]
    result = Grouping(len(window), len(window) - len(candidates), group(candidates, input_ids))
    if memo is not None:
        if len(memo) >= MEMO_LIMIT:
            memo.clear()
        memo[slot] = result
    return result
