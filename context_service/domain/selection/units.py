"""Selection units: a model's tool calls and every event answering them are
one unit and are never separated.

Units are contiguous runs of events: a unit runs from an event holding calls
to the last event holding a response to any of them, taking in whatever lies
between (parallel calls, interleaved text, chained calls). Contiguity makes
"keep the newest complete units" a suffix of the history, so truncation
never leaves a gap and never splits a unit. One pass, linear time.

Decisions:
- An orphan call (no response anywhere) is its own unit; ``pairing``
  answers it in the built request.
- An orphan response (no call before it in the filtered history) is NOT
  sent when it holds nothing but tool results: providers reject a
  functionResponse without its call. Mixed events are kept as they are.
- A call answered by the current input is pinned: its unit runs to the end
  of the history and is as undroppable as the input itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from context_service.domain.config import ContentType
from context_service.domain.selection.records import ContentRecord, EventRecord

_ONLY_RESPONSES = frozenset({ContentType.FUNCTION_RESPONSE})


@dataclass(frozen=True, slots=True)
class Units:
    events: list[EventRecord]
    # ``events[i].body``, never None: events without a body form no unit.
    bodies: list[ContentRecord]
    # Inclusive (first, last) positions in ``events``, oldest unit first.
    bounds: list[tuple[int, int]]
    orphan_responses: int
    # True when the last unit is pinned by the current input.
    pinned: bool
    # Budget bytes of each unit, in the order of ``bounds``.
    sizes: list[int]


class Grouper:
    """``group`` one event at a time, so a history that grows by appends is
    extended instead of regrouped. Pinning depends on the request's input,
    so it is applied to a snapshot (``units``), never to the state.

    Same result as the reach scan of ``group``: a response links back to
    the calls it answers, and the unit holding the oldest of them then runs
    to the response, taking in every unit after it (units are contiguous
    and the response is the newest event)."""

    __slots__ = ("bodies", "bounds", "call_at", "kept", "orphans", "sizes")

    def __init__(self) -> None:
        self.kept: list[EventRecord] = []
        self.bodies: list[ContentRecord] = []
        self.bounds: list[tuple[int, int]] = []
        self.sizes: list[int] = []  # per unit
        self.call_at: dict[str, int] = {}
        self.orphans = 0

    def copy(self) -> Grouper:
        other = Grouper.__new__(Grouper)
        other.kept, other.bodies = self.kept.copy(), self.bodies.copy()
        other.bounds, other.sizes = self.bounds.copy(), self.sizes.copy()
        other.call_at, other.orphans = self.call_at.copy(), self.orphans
        return other

    def add(self, events: Iterable[EventRecord]) -> None:
        kept, bodies, bounds, sizes, call_at = self.kept, self.bodies, self.bounds, self.sizes, self.call_at
        for r in events:
            body = r.body
            if body is None:
                continue
            pos = len(kept)
            oldest = pos
            if body.response_ids:
                for i in body.response_ids:
                    p = call_at.get(i)
                    if p is not None and p < oldest:
                        oldest = p
                if oldest == pos and r.content_types <= _ONLY_RESPONSES:
                    self.orphans += 1
                    continue
            kept.append(r)
            bodies.append(body)
            if oldest == pos:
                bounds.append((pos, pos))
                sizes.append(body.size)
            else:
                _merge_tail(bounds, sizes, oldest, pos, body.size)
            for call_id in body.call_ids:
                call_at[call_id] = pos

    def units(self, input_response_ids: Iterable[str] = ()) -> Units:
        """A snapshot (later ``add`` calls do not change it), the last unit
        pinned from the oldest call the input answers."""
        call_at = self.call_at
        pinned_from = min((call_at[i] for i in input_response_ids if i in call_at), default=None)
        bounds, sizes = self.bounds.copy(), self.sizes.copy()
        if pinned_from is not None:
            _merge_tail(bounds, sizes, pinned_from, len(self.kept) - 1, 0)
        return Units(self.kept.copy(), self.bodies.copy(), bounds, self.orphans, pinned_from is not None, sizes)


def _merge_tail(bounds: list[tuple[int, int]], sizes: list[int], position: int, last: int, extra: int) -> None:
    """Merges the unit holding ``position`` and every unit after it into one
    unit ending at ``last``, with ``extra`` more bytes (a new event)."""
    k = bisect.bisect_right(bounds, (position, _END)) - 1
    first = bounds[k][0]
    merged = sum(sizes[k:]) + extra
    del bounds[k:], sizes[k:]
    bounds.append((first, last))
    sizes.append(merged)


_END = 1 << 62


def group(events: Iterable[EventRecord], input_response_ids: Iterable[str] = ()) -> Units:
    """The units of ``events`` from scratch."""
    grouper = Grouper()
    grouper.add(events)
    return grouper.units(input_response_ids)
