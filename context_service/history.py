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

Reading the session row is most of a warm BuildContext; storage.heads
reads just what selection needs with one query.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentctx.type.v1 import content_pb2
from context_service.api.convert import content_to_proto
from context_service.domain.model import Content, Event, SessionKey
from context_service.domain.selection import EventRecord, SecretKeys, event_record
from context_service.storage.heads import SessionHead, SessionHeads, head_of  # noqa: F401 - re-exported

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Per-record overhead beyond its content bytes (kept three times: canonical
# JSON, wire encoding, proto), roughly: the domain content and the records.
_RECORD_OVERHEAD = 600


class Rendered:
    """A content in its transport forms: the proto message, and its wire
    bytes as one entry of ``ModelRequest.contents`` (field 3), so that a
    response can be assembled by concatenating cached bytes."""

    __slots__ = ("proto", "wire")

    def __init__(self, proto: content_pb2.Content) -> None:
        self.proto = proto
        self.wire = wire_field(CONTENTS_FIELD, proto.SerializeToString())


CONTENTS_FIELD = 3  # ModelRequest.contents


def wire_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field: tag, length, payload."""
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def render(content: Content) -> Rendered:
    return Rendered(content_to_proto(content))


class EventSource(Protocol):
    """The part of the SessionStore this cache reads."""

    async def list_events(
        self, key: SessionKey, *, after_sequence: int = 0, limit: int | None = None, include_compactions: bool = True
    ) -> list[Event]: ...


@dataclass(frozen=True, slots=True)
class HistoryView:
    """Every stored event's record, in sequence order, and the position of
    the latest COMPACTION record (None: none). ``records`` may be a live,
    append-only list: read it before the next await."""

    records: Sequence[EventRecord]
    compaction_index: int | None
    # For ``selection.select``: emptied whenever ``records`` grows.
    memo: dict = field(default_factory=dict)


@dataclass
class _Entry:
    incarnation: str
    records: list[EventRecord] = field(default_factory=list)
    compaction_index: int | None = None
    size: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    memo: dict = field(default_factory=dict)

    @property
    def last_sequence(self) -> int:
        return self.records[-1].sequence if self.records else 0

    def add(self, events: Sequence[Event], keys: SecretKeys) -> int:
        added = 0
        for event in events:
            if event.sequence <= self.last_sequence:
                continue  # a concurrent refresh got it first
            record = event_record(event, keys, render)
            if record.is_compaction:
                self.compaction_index = len(self.records)
            self.records.append(record)
            added += _RECORD_OVERHEAD + (3 * record.body.size if record.body is not None else 0)
        self.size += added
        if added:
            self.memo = {}
        return added


class HistoryCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[SessionKey, str], _Entry] = OrderedDict()
        self._size = 0
        self.hits = 0
        self.misses = 0

        self._heads: SessionHeads | None = None
        # The servicer's per-app memos (effective policies, request parts).
        self.memo: dict[Any, Any] = {}

    async def head(self, store: Any, key: SessionKey) -> SessionHead:
        """The session's head, read with one query (see SessionHeads)."""
        if self._heads is None:
            self._heads = SessionHeads(store)
        return await self._heads.get(key)

    async def close(self) -> None:
        if self._heads is not None:
            await self._heads.close()

    @property
    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    async def load(self, store: EventSource, session: SessionHead, keys: SecretKeys) -> HistoryView:
        """The records of ``session`` up to at least its last_sequence."""
        slot = (session.key, keys.fingerprint)
        entry = self._entries.get(slot)
        if entry is not None and (
            entry.incarnation != session.incarnation or entry.last_sequence > session.last_sequence
        ):
            self._drop(slot)
            entry = None
        if entry is None:
            entry = _Entry(session.incarnation)
            self._entries[slot] = entry
        if entry.last_sequence < session.last_sequence:
            self.misses += 1
            async with entry.lock:
                if entry.last_sequence < session.last_sequence:
                    events = await store.list_events(session.key, after_sequence=entry.last_sequence)
                    added = entry.add(events, keys)
                    if self._entries.get(slot) is entry:
                        self._size += added
        else:
            self.hits += 1
        if self._entries.get(slot) is entry:
            self._entries.move_to_end(slot)
            self._evict()
        return HistoryView(entry.records, entry.compaction_index, entry.memo)

    def forget(self, key: SessionKey) -> None:
        """Drops every entry of ``key`` (for example after a delete)."""
        for slot in [s for s in self._entries if s[0] == key]:
            self._drop(slot)

    def _drop(self, slot: tuple[SessionKey, str]) -> None:
        entry = self._entries.pop(slot, None)
        if entry is not None:
            self._size -= entry.size

    def _evict(self) -> None:
        newest_slot, newest = next(reversed(self._entries.items()))
        if newest.size > self.max_bytes:  # too big to keep: do not flush the rest for it
            self._drop(newest_slot)
        while self._size > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
