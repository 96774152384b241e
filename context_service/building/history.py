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
from typing import Any

from context_service.domain.model import Event, SessionKey
from context_service.domain.selection import EventRecord, SecretKeys, event_record
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
            added += _record_size(record)
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
        freed = sum(_record_size(r) for r in self.records[:start])
        self.records = self.records[start:]
        self.compaction_index = ci - start
        self.memo = {}
        self.size -= freed
        return -freed


def _record_size(record: EventRecord) -> int:
    return _RECORD_OVERHEAD + (3 * record.body.size if record.body is not None else 0)


class HistoryCache:
    def __init__(self, source: EventSource, render: Render, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._source = source
        self._render = render
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[SessionKey, str], _Entry] = OrderedDict()
        self._size = 0
        # The key sets each session has entries under (``appended``).
        self._fingerprints: dict[SessionKey, set[str]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    async def load(self, session: SessionHead, keys: SecretKeys) -> HistoryView:
        """The records of ``session`` up to at least its last_sequence."""
        slot = (session.key, keys.fingerprint)
        entry = self._entries.get(slot)
        if entry is not None and (
            entry.incarnation != session.incarnation or entry.last_sequence > session.last_sequence
        ):
            self._drop(slot)
            entry = None
        if entry is None:
            entry = _Entry(session.incarnation, keys)
            self._entries[slot] = entry
            self._fingerprints.setdefault(session.key, set()).add(keys.fingerprint)
        if entry.last_sequence < session.last_sequence:
            self.misses += 1
            async with entry.lock:
                if entry.last_sequence < session.last_sequence:
                    events = await self._source.list_events(session.key, after_sequence=entry.last_sequence)
                    added = entry.add(events, self._render)
                    if self._entries.get(slot) is entry:
                        self._size += added
        else:
            self.hits += 1
        if self._entries.get(slot) is entry:
            self._entries.move_to_end(slot)
            self._evict()
        return HistoryView(entry.records, entry.compaction_index, entry.memo)

    def appended(self, key: SessionKey, events: Sequence[Event]) -> None:
        """Events this process just stored on ``key``, in sequence order: an
        entry whose last sequence they continue takes them without a read.
        Anything else (a gap, another replica's appends) is left to the
        next ``load``, which reads from the last cached sequence."""
        if not events or any(b.sequence != a.sequence + 1 for a, b in itertools.pairwise(events)):
            return
        for fingerprint in self._fingerprints.get(key, ()):
            entry = self._entries[(key, fingerprint)]
            if events[0].sequence != entry.last_sequence + 1 or entry.lock.locked():
                continue  # a gap, or a read under way that will add them
            self._size += entry.add(events, self._render)
        while self._size > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))

    def forget(self, key: SessionKey) -> None:
        """Drops every entry of ``key`` (for example after a delete)."""
        for fingerprint in list(self._fingerprints.get(key, ())):
            self._drop((key, fingerprint))

    def _drop(self, slot: tuple[SessionKey, str]) -> None:
        entry = self._entries.pop(slot, None)
        if entry is not None:
            self._size -= entry.size
            fingerprints = self._fingerprints.get(slot[0])
            if fingerprints is not None:
                fingerprints.discard(slot[1])
                if not fingerprints:
                    del self._fingerprints[slot[0]]

    def _evict(self) -> None:
        newest_slot, newest = next(reversed(self._entries.items()))
        if newest.size > self.max_bytes:  # too big to keep: do not flush the rest for it
            self._drop(newest_slot)
        while self._size > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
