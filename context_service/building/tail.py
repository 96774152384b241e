"""Bounded builds: read what the budget can take, newest first.

A BuildContext whose policy has a budget and truncates (``overflow =
TRUNCATE``) keeps the newest complete units that fit, so it needs only the
newest events of the window, not the whole history. ``TailReader`` keeps,
per session (and secret-key set), a suffix of the session's records read in
pages newest first from the store (``ports.EventPages``), plus the latest
COMPACTION record wherever it lies (the window starts at its first kept
event). A build selects on that suffix and checks that the result is the
one the whole window gives (``_exact``); if not, it reads one more page
and tries again, down to the window's start at worst.

The suffix gives the whole window's selection when:

- it reaches the window's start (then it is the window); or
- the newest units stop at a unit that does not fit and that unit is
  *exact*: a response in the suffix whose call is older than the suffix
  (or nowhere in it) joins everything before it, in the whole history, to
  the unit holding that call, so only the units after the newest such
  response are known to be the whole history's units (a page boundary
  never splits a unit: an unsure unit is never the one a build stops at);
- the unit the current input answers (pinned) is exact;
- calibration sees its newest replies in the suffix (or is off).

Counts over the whole window (``events_seen``, ``events_filtered``,
``units_dropped``) then cover only the events read; the selected history,
its bytes, tokens and fingerprints are the same as the full read's.

Appends extend an entry (one read of the rows past its last sequence, or
none for this process's own appends); a suffix that has grown to more than
twice what the last build needed is trimmed, so the entry, and the cost of
a build or of the build after an append, stay bounded by the budget, not
by the history. Unbounded budgets and the ERROR and COMPRESS modes (which
need the whole window) keep using ``building.history``.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from agentctx_common.errors import ResourceExhausted
from context_service.building.history import HistoryView, Slots, record_size, without
from context_service.building.retractions import honoured
from context_service.domain import selection as sel
from context_service.domain.config import EventFilter, OverflowMode, SelectionPolicy
from context_service.domain.model import Event, SessionKey
from context_service.domain.selection.filters import predicate
from context_service.domain.selection.grouping import carried, grouping
from context_service.domain.selection.records import EventRecord, Render
from context_service.domain.selection.tokens import CALIBRATION_REPLIES
from context_service.domain.session_records import SessionHead
from context_service.ports import EventPages

PAGE = 256
_NONE: frozenset[tuple[int, str]] = frozenset()
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
# Appends past an entry's last sequence read in one query before the entry
# is dropped and read again newest first (another replica appended a lot).
_CATCH_UP = 4 * PAGE


def bounded(policy: SelectionPolicy) -> bool:
    """True when a build with ``policy`` needs only the newest events."""
    return policy.overflow is OverflowMode.TRUNCATE and (policy.max_bytes is not None or policy.max_tokens is not None)


@dataclass
class _Entry:
    incarnation: str
    keys: sel.SecretKeys
    # What select sees: the latest compaction record first when it is older
    # than the suffix (``head``), then the suffix, in sequence order.
    records: list[EventRecord] = field(default_factory=list)
    head: bool = False
    # The suffix reaches the window's start (or sequence 1): it is the window.
    complete: bool = False
    last_sequence: int = 0
    size: int = 0
    memo: dict[Any, Any] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Per event filter: (sequence, call id) of responses that answer no call
    # of the whole window (found while the suffix was the window), and the
    # last sequence looked at. They stay orphans while the window stays
    # (calls come first), so they do not make a later suffix read to the
    # window's start again; a new compaction forgets them.
    orphans: dict[EventFilter | None, set[tuple[int, str]]] = field(default_factory=dict)
    orphans_upto: dict[EventFilter | None, int] = field(default_factory=dict)

    @property
    def floor(self) -> int:
        """The oldest sequence of the suffix (last_sequence + 1 when empty)."""
        suffix = self.records[1:] if self.head else self.records
        return suffix[0].sequence if suffix else self.last_sequence + 1

    @property
    def compaction_index(self) -> int | None:
        return sel.latest_compaction(self.records)

    def window_start(self) -> int:
        ci = self.compaction_index
        return max(1, self.records[ci].kept_from) if ci is not None else 1

    def set_records(self, records: list[EventRecord], head: bool) -> None:
        self.records, self.head, self.memo = records, head, {}
        self.size = sum(record_size(r) for r in records)
        self.complete = self.floor <= self.window_start()

    def extend(self, records: Sequence[EventRecord]) -> None:
        """Records past ``last_sequence``, in order."""
        if not records:
            return
        self.last_sequence = records[-1].sequence
        if any(r.is_compaction for r in records):
            # A new window: what lies before its first kept event is never shown.
            merged = [*(self.records[1:] if self.head else self.records), *records]
            ci = sel.latest_compaction(merged)
            assert ci is not None
            start = bisect.bisect_left(merged, merged[ci].kept_from, key=lambda r: r.sequence)
            kept = merged[min(start, ci):]
            self.set_records(kept, False)
            # A compaction may keep older events than the last one did:
            # orphans of the old window may find their calls.
            self.orphans.clear()
            self.orphans_upto.clear()
            return
        self.records.extend(records)
        self.size += sum(record_size(r) for r in records)
        self.memo = carried(self.memo)


class TailReader:
    """Bounded selection over a per-process cache of session suffixes."""

    def __init__(self, source: EventPages, render: Render, *, page: int = PAGE, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._source = source
        self._render = render
        self.page = page
        self._slots: Slots[_Entry] = Slots(max_bytes)
        # Events read from the store (tests and benchmarks).
        self.rows_read = 0

    def __len__(self) -> int:
        return len(self._slots.entries)

    def entries(self) -> list[tuple[SessionKey, int]]:
        """Each entry's session and how many records it holds (tests)."""
        return [(key, len(e.records)) for (key, _), e in self._slots.entries.items()]

    async def select(
        self,
        session: SessionHead,
        keys: sel.SecretKeys,
        inputs: Sequence[sel.ContentRecord],
        policy: SelectionPolicy,
        exclude_events: frozenset[str] = frozenset(),
    ) -> tuple[sel.Selection, HistoryView]:
        """The selection ``sel.select`` makes over the whole history (see the
        module docstring for the counts), and the view it was made on."""
        slots = self._slots
        slot = (session.key, keys.fingerprint)
        entry = slots.entries.get(slot)
        if entry is not None and (
            entry.incarnation != session.incarnation
            or entry.last_sequence > session.last_sequence
            or session.last_sequence - entry.last_sequence > _CATCH_UP
        ):
            slots.drop(slot)
            entry = None
        if entry is None:
            entry = _Entry(session.incarnation, keys)
            slots.put(slot, entry)
        async with entry.lock:
            before = entry.size
            if entry.last_sequence == 0 and not entry.records:
                await self._first_page(session, entry)
            elif entry.last_sequence < session.last_sequence:
                events = await self._source.list_events(session.key, after_sequence=entry.last_sequence)
                self.rows_read += len(events)
                entry.extend([self._record(e, keys) for e in events])
            while True:
                view = honoured(HistoryView(entry.records, entry.compaction_index, entry.memo))
                if exclude_events:
                    view = without(view, exclude_events)
                known = entry.orphans.get(policy.filter, _NONE)
                try:
                    selection = sel.select(view.records, inputs, policy, compaction_index=view.compaction_index, memo=view.memo)
                except ResourceExhausted:
                    if entry.complete or _exact(view, inputs, policy, None, known):
                        raise
                    selection = None
                if selection is not None and (entry.complete or _exact(view, inputs, policy, selection, known)):
                    break
                await self._older_page(session, entry)
            if entry.complete and entry.orphans_upto.get(policy.filter, -1) < entry.last_sequence:
                whole = _scan(honoured(HistoryView(entry.records, entry.compaction_index)), policy, _NONE)
                entry.orphans.setdefault(policy.filter, set()).update(whole.unanswered)
                entry.orphans_upto[policy.filter] = entry.last_sequence
            if selection.grouping is not None:
                self._trim(entry, selection, policy)
            if slots.holds(slot, entry):
                slots.size += entry.size - before
            slots.used(slot, entry)
        return selection, view

    def appended(self, key: SessionKey, events: Sequence[Event]) -> None:
        """Events this process just stored, in sequence order: an entry whose
        last sequence they continue takes them without a read."""
        if not events or any(b.sequence != a.sequence + 1 for a, b in itertools.pairwise(events)):
            return
        for entry in self._slots.of(key):
            if events[0].sequence != entry.last_sequence + 1 or entry.lock.locked():
                continue
            before = entry.size
            entry.extend([self._record(e, entry.keys) for e in events])
            self._slots.size += entry.size - before
        self._slots.shrink()

    def forget(self, key: SessionKey) -> None:
        self._slots.forget(key)

    def _record(self, event: Event, keys: sel.SecretKeys) -> EventRecord:
        return sel.event_record(event, keys, self._render)

    async def _first_page(self, session: SessionHead, entry: _Entry) -> None:
        events = await self._source.list_events_before(session.key, before_sequence=0, limit=self.page)
        self.rows_read += len(events)
        records = [self._record(e, entry.keys) for e in events]
        entry.last_sequence = records[-1].sequence if records else 0
        ci = sel.latest_compaction(records)
        head = False
        if ci is not None:
            start = bisect.bisect_left(records, records[ci].kept_from, key=lambda r: r.sequence)
            records = records[min(start, ci):]
        elif records and records[0].sequence > 1:
            compaction = await self._source.latest_compaction(session.key)
            if compaction is not None:
                self.rows_read += 1
                records.insert(0, self._record(compaction, entry.keys))
                head = True
        entry.set_records(records, head)

    async def _older_page(self, session: SessionHead, entry: _Entry) -> None:
        """Prepends the page before the suffix (after the head record)."""
        events = await self._source.list_events_before(session.key, before_sequence=entry.floor, limit=self.page)
        self.rows_read += len(events)
        if not events:  # nothing older: the suffix is the whole history
            entry.complete = True
            return
        older = [self._record(e, entry.keys) for e in events]
        suffix = entry.records[1:] if entry.head else entry.records
        if entry.head and older[0].sequence <= entry.records[0].sequence:
            # The page reached the compaction record itself.
            entry.set_records([*older, *suffix], False)
        else:
            entry.set_records([*entry.records[:1], *older, *suffix] if entry.head else [*older, *suffix], entry.head)

    def _trim(self, entry: _Entry, selection: sel.Selection, policy: SelectionPolicy) -> None:
        """Drops the suffix's records older than the newest unit the last
        build dropped once they are more than half of it (the window slides
        forward with appends; a larger budget reads them again)."""
        grouping = selection.grouping
        assert grouping is not None
        units = grouping.units
        first = bisect.bisect_left(units.bounds, (selection.first_event, -1))
        if first == 0:
            return
        keep_from = units.events[units.bounds[first - 1][0]].sequence
        start = 1 if entry.head else 0
        records = entry.records
        cut = bisect.bisect_left(records, keep_from, lo=start, key=lambda r: r.sequence)
        if cut - start <= max(self.page, (len(records) - cut)):
            return
        if not policy.disable_calibration:
            # Keep the replies calibration reads, or the next build reads them again.
            found, at = 0, len(records)
            while found < CALIBRATION_REPLIES and at > start:
                at -= 1
                found += records[at].prompt_tokens > 0 and not records[at].is_compaction
            cut = min(cut, at) if found == CALIBRATION_REPLIES else start
            if cut - start <= max(self.page, (len(records) - cut)):
                return
        # The latest compaction record stays (as the head) when it is cut.
        ci = entry.compaction_index
        if ci is not None and ci < cut:
            entry.set_records([records[ci], *records[cut:]], True)
        else:
            entry.set_records(records[cut:], False)


def _exact(
    view: HistoryView, inputs: Sequence[sel.ContentRecord], policy: SelectionPolicy, selection: sel.Selection | None,
    known: Set[tuple[int, str]],
) -> bool:
    """``_check``, remembered in the view's memo while its records do not
    change (a warm build repeats it for nothing)."""
    input_ids = tuple(i for c in inputs for i in c.response_ids)
    slot = ("exact", len(view.records), policy, input_ids, None if selection is None else selection.first_event)
    hit: bool | None = view.memo.get(slot)
    if hit is None:
        hit = view.memo[slot] = _check(view, input_ids, policy, selection, known)
    return hit


@dataclass(slots=True)
class _Scan:
    start: int  # the window's first position in the view
    called: set[str]
    # Visible responses answering no call of the view (and not known
    # orphans), and the newest one's sequence.
    unanswered: list[tuple[int, str]]
    crossing: int
    replies: int  # replies with usage that calibration may read


def _scan(view: HistoryView, policy: SelectionPolicy, known: Set[tuple[int, str]]) -> _Scan:
    records = view.records
    ci = view.compaction_index
    start = 0
    if ci is not None:
        start = bisect.bisect_left(records, records[ci].kept_from, key=lambda r: r.sequence)
    keep = _keep(policy.filter)
    called: set[str] = set()
    unanswered: list[tuple[int, str]] = []
    replies = 0
    calibration_from = max(start, ci + 1) if ci is not None else start
    for i in range(start, len(records)):
        r = records[i]
        if r.is_compaction:
            continue
        if i >= calibration_from and r.prompt_tokens > 0:
            replies += 1
        body = r.body
        if body is None or not keep(r):
            continue
        if body.response_ids and not called.issuperset(body.response_ids):
            unanswered += [(r.sequence, c) for c in body.response_ids if c not in called and (r.sequence, c) not in known]
        called.update(body.call_ids)
    return _Scan(start, called, unanswered, unanswered[-1][0] if unanswered else 0, replies)


def _check(
    view: HistoryView, input_ids: tuple[str, ...], policy: SelectionPolicy, selection: sel.Selection | None,
    known: Set[tuple[int, str]],
) -> bool:
    """True when ``selection`` over the suffix ``view`` is the whole
    window's (``selection`` None: the build failed on the current input
    alone; True when that failure is the whole window's too)."""
    records = view.records
    scan = _scan(view, policy, known)
    start, called, crossing, replies = scan.start, scan.called, scan.crossing, scan.replies
    if not policy.disable_calibration and replies < CALIBRATION_REPLIES:
        return False
    if not called.issuperset(input_ids):
        return False
    if selection is None:
        units = grouping(records, start, policy.filter, input_ids, view.memo).units
        return not units.pinned or units.events[units.bounds[-1][0]].sequence > crossing
    if selection.grouping is None:
        return False
    units = selection.grouping.units
    first = bisect.bisect_left(units.bounds, (selection.first_event, -1))
    if first == 0:
        return False  # every unit fits: only the whole window can say
    dropped = units.events[units.bounds[first - 1][0]]
    if dropped.sequence <= crossing:
        return False
    return not units.pinned or units.events[units.bounds[-1][0]].sequence > crossing


def _keep(event_filter: EventFilter | None) -> Any:
    """The grouping's per-event test (partial events out by default)."""
    if event_filter is None or event_filter == EventFilter():
        return lambda r: not r.partial
    return predicate(event_filter)
