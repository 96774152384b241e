"""A per-process, read-through cache of sessions' selection records.

Events are immutable and append-only, so the decoded, pruned, canonical
record of an event (with its proto Content and wire bytes) is computed once and
reused by every later BuildContext on the session. Each call reads the
session row; when its ``last_sequence`` moved, only the newer events are
fetched (one query). That stays correct with several replicas sharing one
database. An entry is dropped when the session was deleted or recreated
(its incarnation changed, or its last_sequence went backwards).

Records depend on the secret key set that pruned them, so entries are keyed
by (session, key-set fingerprint); the built-in set is the common case. The
cache is bounded by an estimate of its bytes, least recently used first out.

An append made in this process extends the entry directly (``appended``,
fed by ``building.appends.ObservedSessions``) when it is the next sequence:
the build after it reads no rows. The grouped states of the selection memo
carry over to the longer list (``grouping.carried``), so the build after an
append groups only the new records. Records before the latest compaction's
first kept event are never shown again: when a COMPACTION record arrives
the entry drops them (and starts a fresh memo), so a long, regularly
compacted session holds only its live window.

Records carry their transport form, made by the ``render`` the composition
root passes in (``mapping.wire.render`` on the server). Reading the session
row is most of a warm BuildContext: the ``SessionHeads`` port reads just
what selection needs with one query.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from context_service.domain.model import Event, SessionKey
from context_service.domain.selection import EventRecord, SecretKeys, event_record, latest_compaction
from context_service.domain.selection.grouping import carried
from context_service.domain.selection.records import Render
from context_service.domain.session_records import SessionHead
from context_service.ports import EventSource

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Per-record overhead beyond its content bytes (kept three times: canonical
# JSON, wire encoding, proto), roughly: the domain content and the records.
_RECORD_OVERHEAD = 600


@dataclass(frozen=True, slots=True)
class HistoryView:
    """Every stored event's record, in sequence order, and the position of
    the latest COMPACTION record (None: none). ``records`` may be a live,
    append-only list: read it before the next await."""

    records: Sequence[EventRecord]
    compaction_index: int | None
    # For ``selection.select``; a new one whenever ``records`` grows (its
    # grouped states carried over) or is trimmed.
    memo: dict[Any, Any] = field(default_factory=dict)


@dataclass
class _Entry:
    incarnation: str
    keys: SecretKeys
    records: list[EventRecord] = field(default_factory=list)
    compaction_index: int | None = None
    size: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    memo: dict[Any, Any] = field(default_factory=dict)

    @property
    def last_sequence(self) -> int:
        return self.records[-1].sequence if self.records else 0

    def add(self, events: Sequence[Event], render: Render) -> int:
        """Adds the events past the last cached sequence; the change in
        bytes held (negative when a compaction let older records go)."""
        added = 0
        compacted = False
        for event in events:
            if event.sequence <= self.last_sequence:
                continue  # a concurrent refresh got it first
            record = event_record(event, self.keys, render)
            if record.is_compaction:
                self.compaction_index = len(self.records)
                compacted = True
            self.records.append(record)
            added += record_size(record)
        if not added:
            return 0
        self.size += added
        if compacted:
            return added + self._trim()
        self.memo = carried(self.memo)
        return added

    def _trim(self) -> int:
        """Drops the records before the latest compaction's first kept event
        (a new list: views handed out keep theirs). Returns the bytes freed,
        negated."""
        ci = self.compaction_index
        assert ci is not None
        kept_from = self.records[ci].kept_from
        start = bisect.bisect_left(self.records, kept_from, key=lambda r: r.sequence)
        start = min(start, ci)
        if start == 0:
            self.memo = {}
            return 0
        freed = sum(record_size(r) for r in self.records[:start])
        self.records = self.records[start:]
        self.compaction_index = ci - start
        self.memo = {}
        self.size -= freed
        return -freed


def record_size(record: EventRecord) -> int:
    return _RECORD_OVERHEAD + (3 * record.body.size if record.body is not None else 0)


class _Sized(Protocol):
    size: int


E = TypeVar("E", bound=_Sized)


class Slots(Generic[E]):
    """Entries per (session, key-set fingerprint), least recently used
    first, bounded by an estimate of their bytes (each entry's ``size``;
    whoever changes an entry's size adds the change to ``size`` here)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[SessionKey, str], E] = OrderedDict()
        self.size = 0
        # The key sets each session has entries under.
        self.fingerprints: dict[SessionKey, set[str]] = {}

    def put(self, slot: tuple[SessionKey, str], entry: E) -> None:
        self.entries[slot] = entry
        self.size += entry.size
        self.fingerprints.setdefault(slot[0], set()).add(slot[1])

    def of(self, key: SessionKey) -> list[E]:
        return [self.entries[(key, f)] for f in self.fingerprints.get(key, ())]

    def holds(self, slot: tuple[SessionKey, str], entry: E) -> bool:
        return self.entries.get(slot) is entry

    def forget(self, key: SessionKey) -> None:
        for fingerprint in list(self.fingerprints.get(key, ())):
            self.drop((key, fingerprint))

    def drop(self, slot: tuple[SessionKey, str]) -> None:
        entry = self.entries.pop(slot, None)
        if entry is not None:
            self.size -= entry.size
            fingerprints = self.fingerprints.get(slot[0])
            if fingerprints is not None:
                fingerprints.discard(slot[1])
                if not fingerprints:
                    del self.fingerprints[slot[0]]

    def used(self, slot: tuple[SessionKey, str], entry: E) -> None:
        """``entry`` at ``slot`` was just used: newest, then evict over the
        bound (an entry too big to keep alone goes without flushing the
        rest)."""
        if self.entries.get(slot) is not entry:
            return
        self.entries.move_to_end(slot)
        if entry.size > self.max_bytes:
            self.drop(slot)
        self.shrink()

    def shrink(self) -> None:
        while self.size > self.max_bytes and self.entries:
            self.drop(next(iter(self.entries)))


class HistoryCache:
    def __init__(self, source: EventSource, render: Render, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._source = source
        self._render = render
        self._slots: Slots[_Entry] = Slots(max_bytes)
        self.hits = 0
        self.misses = 0

    @property
    def max_bytes(self) -> int:
        return self._slots.max_bytes

    @property
    def size(self) -> int:
        return self._slots.size

    def __len__(self) -> int:
        return len(self._slots.entries)

    async def load(self, session: SessionHead, keys: SecretKeys) -> HistoryView:
        """The records of ``session`` up to at least its last_sequence."""
        slots = self._slots
        slot = (session.key, keys.fingerprint)
        entry = slots.entries.get(slot)
        if entry is not None and (
            entry.incarnation != session.incarnation or entry.last_sequence > session.last_sequence
        ):
            slots.drop(slot)
            entry = None
        if entry is None:
            entry = _Entry(session.incarnation, keys)
            slots.put(slot, entry)
        if entry.last_sequence < session.last_sequence:
            self.misses += 1
            async with entry.lock:
                if entry.last_sequence < session.last_sequence:
                    events = await self._source.list_events(session.key, after_sequence=entry.last_sequence)
                    added = entry.add(events, self._render)
                    if slots.holds(slot, entry):
                        slots.size += added
        else:
            self.hits += 1
        slots.used(slot, entry)
        return HistoryView(entry.records, entry.compaction_index, entry.memo)

    def appended(self, key: SessionKey, events: Sequence[Event]) -> None:
        """Events this process just stored on ``key``, in sequence order: an
        entry whose last sequence they continue takes them without a read.
        Anything else (a gap, another replica's appends) is left to the
        next ``load``, which reads from the last cached sequence."""
        if not events or any(b.sequence != a.sequence + 1 for a, b in itertools.pairwise(events)):
            return
        for entry in self._slots.of(key):
            if events[0].sequence != entry.last_sequence + 1 or entry.lock.locked():
                continue  # a gap, or a read under way that will add them
            self._slots.size += entry.add(events, self._render)
        self._slots.shrink()

    def forget(self, key: SessionKey) -> None:
        """Drops every entry of ``key`` (for example after a delete)."""
        self._slots.forget(key)


def without(view: HistoryView, exclude: frozenset[str]) -> HistoryView:
    """``view`` without the events ``exclude`` names. A turn's input events
    are the newest records (unless another writer appended after them): the
    prefix before them shares the view's memo, whose grouped states serve
    prefixes too. Anywhere else, a filtered list with a memo of its own."""
    records = view.records
    end = len(records)
    while end and records[end - 1].event_id in exclude:
        end -= 1
    # Event ids are unique in a session: when the newest records carried
    # every excluded id, no older one can (no look at the whole history).
    if len(records) - end == len(exclude) or not any(r.event_id in exclude for r in records[:end]):
        ci = view.compaction_index
        return HistoryView(records[:end], ci if ci is None or ci < end else latest_compaction(records[:end]), view.memo)
    kept = [r for r in records if r.event_id not in exclude]
    return HistoryView(kept, latest_compaction(kept))
