"""Selection units: a model's tool calls and every event answering them are
one unit and are never separated.

Units are contiguous runs of events: a unit runs from an event holding calls
to the last event holding a response to any of them, taking in whatever lies
between (parallel calls, interleaved text, chained calls). Contiguity makes
"keep the newest complete units" a suffix of the history, so truncation
never leaves a gap and never splits a unit. One pass, linear time.

Decisions:
- An orphan call (no response anywhere) is sent; it is its own unit.
- An orphan response (no call before it in the filtered history) is NOT
  sent when it holds nothing but tool results: providers reject a
  functionResponse without its call. Mixed events are kept as they are.
- A call answered by the current input is pinned: its unit runs to the end
  of the history and is as undroppable as the input itself.
"""

from __future__ import annotations

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


def group(events: Iterable[EventRecord], input_response_ids: Iterable[str] = ()) -> Units:
    kept: list[EventRecord] = []
    bodies: list[ContentRecord] = []
    sizes: list[int] = []
    reach: list[int] = []  # per position: the last position its unit must reach
    call_at: dict[str, int] = {}
    orphans = 0
    for r in events:
        body = r.body
        if body is None:
            continue
        pos = len(kept)
        if body.response_ids:
            linked = [call_at[i] for i in body.response_ids if i in call_at]
            if not linked and r.content_types <= _ONLY_RESPONSES:
                orphans += 1
                continue
            for p in linked:
                reach[p] = pos
        kept.append(r)
        bodies.append(body)
        sizes.append(body.size)
        reach.append(pos)
        for call_id in body.call_ids:
            call_at[call_id] = pos
    pinned_from = min((call_at[i] for i in input_response_ids if i in call_at), default=None)
    if pinned_from is not None:
        reach[pinned_from] = len(kept) - 1
    bounds: list[tuple[int, int]] = []
    unit_sizes: list[int] = []
    i, n = 0, len(kept)
    while i < n:
        end = reach[i]
        j = i
        while j < end:
            j += 1
            if reach[j] > end:
                end = reach[j]
        bounds.append((i, end))
        unit_sizes.append(sizes[i] if i == end else sum(sizes[i:end + 1]))
        i = end + 1
    return Units(kept, bodies, bounds, orphans, pinned_from is not None, unit_sizes)
