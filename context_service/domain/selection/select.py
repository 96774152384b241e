"""Choosing the history for one model request.

Pipeline, linear in the number of stored events:

1. window: the latest COMPACTION event's summary, then the MESSAGE events
   from its first kept sequence on (older compaction events are never shown);
2. filters (partial events out unless asked for);
3. selection units (``units.group``), orphan tool results dropped;
4. budgets on history + current input (``max_bytes`` / ``max_tokens``):
   the input, and a unit the input answers, are never dropped; past the
   budget, ERROR fails, TRUNCATE keeps the newest complete units (the
   summary is the oldest unit), COMPRESS keeps the newest units that fit in
   three quarters of the budget and asks a compressor to summarize the rest
   into the remaining quarter (``finish_compression``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agentctx_common.reasons import Reason
from context_service.domain import model as m
from context_service.domain.config import OverflowMode, SelectionPolicy
from context_service.domain.selection import errors
from context_service.domain.selection.grouping import Grouping, grouping
from context_service.domain.selection.records import (
    ContentRecord,
    EventRecord,
    Render,
    content_record,
    summary_content,
)
from context_service.domain.selection.secrets import SecretKeys
from context_service.domain.selection.tokens import (
    DEFAULT_BYTES_PER_TOKEN,
    byte_allowance,
    calibrate,
    estimate,
)

_UNKNOWN = object()
# Share of an overflowing budget left for the summary in COMPRESS mode.
COMPRESS_SUMMARY_SHARE = 4


@dataclass(frozen=True, slots=True)
class CompressionRequest:
    """What COMPRESS asks a compressor to summarize: the dropped contents
    (a dropped earlier summary first), and the UTF-8 bytes the summary text
    may take (half the room left, so that even a text whose every character
    needs a two-byte JSON escape fits once rendered)."""

    contents: list[m.Content]
    max_summary_bytes: int
    # Budget bytes left for the rendered summary content (text, role and
    # JSON framing): what finish_compression checks.
    room: int = 0


class Compressor(Protocol):
    """Summarizes what COMPRESS dropped (delivered with compaction). Must
    return at most ``request.max_summary_bytes`` UTF-8 bytes of text."""

    async def __call__(self, request: CompressionRequest) -> str: ...


@dataclass(frozen=True, slots=True)
class Selection:
    summary: ContentRecord | None
    events: Sequence[EventRecord]
    events_seen: int
    events_filtered: int
    units_selected: int
    units_dropped: int
    history_bytes: int
    bytes_per_token: float
    calibrated: bool
    compaction_sequence: int
    last_sequence: int
    compressed: bool = False
    pending: CompressionRequest | None = field(default=None, repr=False)
    # Where ``events`` start in ``grouping.units.events``: the canonical
    # bytes of the selection are a suffix of the grouping's layout.
    grouping: Grouping | None = field(default=None, repr=False)
    first_event: int = 0
    # The history as sent when pairing changed it (``pairing.pair_calls``:
    # synthesized, moved or dropped function responses), summary first.
    paired: Sequence[ContentRecord] | None = field(default=None, repr=False)
    calls_synthesized: int = 0
    responses_moved: int = 0
    responses_dropped: int = 0

    @property
    def history(self) -> list[ContentRecord]:
        """Selected history contents in order, summary first."""
        if self.paired is not None:
            return list(self.paired)
        bodies = [r.body for r in self.events if r.body is not None]
        return [self.summary, *bodies] if self.summary is not None else bodies


def latest_compaction(records: Sequence[EventRecord]) -> int | None:
    for i in range(len(records) - 1, -1, -1):
        if records[i].is_compaction:
            return i
    return None


def select(
    records: Sequence[EventRecord],
    inputs: Sequence[ContentRecord],
    policy: SelectionPolicy,
    *,
    compaction_index: int | object | None = _UNKNOWN,
    memo: dict[Any, Any] | None = None,
) -> Selection:
    """The history for one request. ``records``: every stored event in
    sequence order; ``compaction_index``: the position of the latest
    COMPACTION record if the caller already knows it (None: there is none);
    ``memo``: see ``grouping``. Raises ResourceExhausted for budgets."""
    ci = latest_compaction(records) if compaction_index is _UNKNOWN else compaction_index
    assert ci is None or isinstance(ci, int)
    summary: EventRecord | None = None
    start = 0
    if ci is not None:
        summary = records[ci]
        start = bisect.bisect_left(records, summary.kept_from, key=lambda r: r.sequence)

    bpt = policy.bytes_per_token or DEFAULT_BYTES_PER_TOKEN
    calibrated = False
    if not policy.disable_calibration:
        observed = calibrate(records, max(start, ci + 1) if ci is not None else start)
        if observed is not None:
            bpt, calibrated = observed, True

    input_ids = tuple(i for c in inputs for i in c.response_ids)
    grouped = grouping(records, start, policy.filter, input_ids, memo)
    units = grouped.units
    sizes = units.sizes
    summary_body = summary.body if summary is not None else None
    summary_size = summary_body.size if summary_body is not None else 0
    input_size = sum(c.size for c in inputs)
    n_units = len(sizes)
    last_sequence = records[-1].sequence if records else 0

    allowance = byte_allowance(policy.max_bytes, policy.max_tokens, bpt)
    total = input_size + summary_size + grouped.total
    if allowance is None or total <= allowance:
        return Selection(
            summary=summary_body,
            events=units.events,
            units_selected=n_units + (1 if summary_body is not None else 0),
            units_dropped=0,
            history_bytes=total - input_size,
            compaction_sequence=summary.sequence if summary is not None and summary_body is not None else 0,
            grouping=grouped,
            events_seen=grouped.seen,
            events_filtered=grouped.filtered,
            bytes_per_token=bpt,
            calibrated=calibrated,
            last_sequence=last_sequence,
        )

    def over(reason: Reason, message: str, measured: int) -> Exception:
        return errors.budget_exceeded(
            reason, message, kind="history", measured_bytes=measured, measured_tokens=estimate(measured, bpt),
            max_bytes=policy.max_bytes, max_tokens=policy.max_tokens, bytes_per_token=bpt,
        )

    pinned = sizes[-1] if units.pinned else 0
    mandatory = input_size + pinned
    if mandatory > allowance:
        raise over(
            Reason.CURRENT_INPUT_EXCEEDS_BUDGET,
            "the current input (with the tool calls it answers) alone exceeds the history budget",
            mandatory,
        )
    mode = policy.overflow
    if mode in (OverflowMode.ERROR, OverflowMode.UNSPECIFIED):
        raise over(Reason.CONTEXT_BUDGET_EXCEEDED, "the selected history exceeds the history budget", total)

    room = allowance
    if mode is OverflowMode.COMPRESS:
        room = max(mandatory, allowance - allowance // COMPRESS_SUMMARY_SHARE)
    used = mandatory
    first = n_units - 1 if units.pinned else n_units
    while first > 0 and used + sizes[first - 1] <= room:
        first -= 1
        used += sizes[first]
    keep_summary = first == 0 and summary_body is not None and used + summary_size <= room
    if keep_summary:
        used += summary_size
    first_event = units.bounds[first][0] if first < n_units else len(units.events)
    kept_events = units.events[first_event:]
    dropped_units = first + (1 if summary_body is not None and not keep_summary else 0)
    selection = Selection(
        summary=summary_body if keep_summary else None,
        events=kept_events,
        first_event=first_event,
        units_selected=(n_units - first) + (1 if keep_summary else 0),
        units_dropped=dropped_units,
        history_bytes=used - input_size,
        compaction_sequence=summary.sequence if keep_summary and summary is not None else 0,
        grouping=grouped,
        events_seen=grouped.seen,
        events_filtered=grouped.filtered,
        bytes_per_token=bpt,
        calibrated=calibrated,
        last_sequence=last_sequence,
    )
    if mode is OverflowMode.COMPRESS and dropped_units:
        dropped: list[m.Content] = []
        if summary_body is not None and not keep_summary:
            dropped.append(summary_body.content)
        dropped.extend(b.content for b in units.bodies[:first_event])
        empty = len(content_record(summary_content(""), SecretKeys(frozenset(), "")).canonical)
        room = allowance - used
        if room < empty:
            raise over(
                Reason.COMPRESSED_CONTEXT_OVER_BUDGET,
                "the history budget leaves no room for a summary of what does not fit",
                used + empty,
            )
        # Half the room for the text: JSON escapes (newlines, quotes) can
        # double a text's encoded size, and the rendered content must fit.
        selection = replace(selection, pending=CompressionRequest(dropped, (room - empty) // 2, room))
    return selection


def finish_compression(
    selection: Selection, summary_text: str, keys: SecretKeys, render: Render | None = None
) -> Selection:
    """``selection`` opened by the compressor's summary of what it dropped.
    A summary over its bound is an error and nothing is built."""
    request = selection.pending
    if request is None:
        return selection
    body = content_record(summary_content(summary_text), keys, render)
    if body.size > request.room:
        # JSON escaping can make a text within max_summary_bytes too large.
        raise errors.budget_exceeded(
            Reason.COMPRESSED_CONTEXT_OVER_BUDGET,
            "the compressed summary does not fit in the history budget",
            kind="history",
            measured_bytes=body.size,
            measured_tokens=estimate(body.size, selection.bytes_per_token),
            max_bytes=request.room,
            max_tokens=None,
            bytes_per_token=selection.bytes_per_token,
        )
    return replace(
        selection,
        summary=body,
        history_bytes=selection.history_bytes + body.size,
        units_selected=selection.units_selected + 1,
        compressed=True,
        pending=None,
    )
