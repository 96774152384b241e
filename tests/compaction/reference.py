"""A slow, obviously-correct statement of the cut-point rules, for checking
the linear implementation against."""

from __future__ import annotations

from collections.abc import Sequence

from context_service.domain.compaction_rules.history import is_user_turn_start
from context_service.domain.model import Event


def _calls(events: Sequence[Event]) -> list[tuple[int, str]]:
    return [
        (i, fc.id)
        for i, e in enumerate(events)
        if e.content is not None and not e.partial
        for fc in e.content.function_calls
    ]


def _responses(events: Sequence[Event]) -> list[tuple[int, str]]:
    return [
        (j, fr.id)
        for j, e in enumerate(events)
        if e.content is not None and not e.partial
        for fr in e.content.function_responses
    ]


def call_of(events: Sequence[Event], j: int, call_id: str) -> int | None:
    """Index of the latest call with this id at or before j."""
    found = None
    for i, cid in _calls(events):
        if i <= j and cid == call_id:
            found = i
    return found


def pending_call_indexes(events: Sequence[Event]) -> set[int]:
    long_running = {t for e in events for t in e.long_running_tool_ids}
    responses = _responses(events)
    out = set()
    for i, cid in _calls(events):
        answered = any(j >= i and rid == cid for j, rid in responses)
        if answered:
            continue
        moved_on = any(
            k > i and not e.partial and e.content is not None and (is_user_turn_start(e) or e.content.role == "model")
            for k, e in enumerate(events)
        )
        if cid in long_running or not moved_on:
            out.add(i)
    return out


def tail_ok(events: Sequence[Event], c: int) -> bool:
    """Every rule about the kept tail events[c:] except budgets."""
    kept_start = c
    if c < len(events):
        first = events[c]
        if first.content is not None and not first.partial and first.content.function_responses:
            return False
    for j, rid in _responses(events):
        if j < kept_start:
            continue
        i = call_of(events, j, rid)
        if i is None or i < kept_start:
            return False
    return all(i >= c for i in pending_call_indexes(events))
