"""A per-process, read-through cache of sessions' selection records.

Events are immutable and append-only, so the decoded, pruned, canonical
record of an event (with its ready-made proto Content) is computed once and
reused by every later BuildContext on the session. Each call reads the
session row; when its ``last_sequence`` moved, only the newer events are
fetched (one query). That stays correct with several replicas sharing one
database. An entry is dropped when the session was deleted or recreated
(its incarnation changed, or its last_sequence went backwards).

Records depend on the secret key set that pruned them, so entries are keyed
by (session, key-set fingerprint); the built-in set is the common case. The
cache is bounded by an estimate of its bytes, least recently used first out.

Reading the session row is most of a warm BuildContext. ``SessionHeads``
reads just what selection needs (incarnation, last sequence, config) with
one query: on SQLite through a dedicated read connection, one thread hop
instead of the several an SQLAlchemy session read takes; on other databases
through the store's get_session.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiosqlite

from agentctx_common.errors import NotFound
from context_service.api.convert import content_to_proto
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, SessionKey
from context_service.domain.selection import EventRecord, SecretKeys, event_record
from context_service.domain.sessions import SessionRecord
from context_service.storage import codec
from context_service.storage.engine import unavailable
from context_service.storage.tables import sessions

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Per-record overhead beyond its canonical bytes: the proto copy, the domain
# content and the record itself, roughly.
_RECORD_OVERHEAD = 600


class EventSource(Protocol):
    """The part of the SessionStore this cache reads."""

    async def list_events(
        self, key: SessionKey, *, after_sequence: int = 0, limit: int | None = None, include_compactions: bool = True
    ) -> list[Event]: ...


@dataclass(frozen=True, slots=True)
class SessionHead:
    """What selection needs of a session row. ``incarnation`` changes when a
    session is deleted and created again under the same name."""

    key: SessionKey
    incarnation: str
    last_sequence: int
    config: ContextConfig


def head_of(record: SessionRecord) -> SessionHead:
    # The etag is "{incarnation}.{version}" (storage.codec.etag).
    return SessionHead(record.key, record.etag.rpartition(".")[0], record.last_sequence, record.config)


class SessionHeads:
    """Reads session heads for one store; see the module docstring."""

    def __init__(self, store: Any) -> None:
        self._store = store
        engine = getattr(store, "engine", None)
        url = getattr(engine, "url", None)
        self._sqlite_path = url.database if url is not None and url.get_backend_name() == "sqlite" else None
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        self._configs: dict[str, ContextConfig] = {}
        t = sessions.c
        self._sql = (
            f"SELECT {t.incarnation.name}, {t.last_sequence.name}, {t.config_json.name} FROM {sessions.name} "
            f"WHERE {t.app.name} = ? AND {t.user_id.name} = ? AND {t.session_id.name} = ?"
        )

    async def get(self, key: SessionKey) -> SessionHead:
        """NOT_FOUND (SESSION_NOT_FOUND) when there is no such session."""
        if self._sqlite_path is None:
            return head_of(await self._store.get_session(key))
        try:
            db = self._db or await self._open()
            rows = await db.execute_fetchall(self._sql, (key.app, key.user, key.session))
        except (aiosqlite.Error, OSError) as exc:
            raise unavailable(exc) from None
        if not rows:
            raise NotFound(f"session {key.name} not found", reason="SESSION_NOT_FOUND")
        incarnation, last_sequence, config_text = next(iter(rows))
        config = self._configs.get(config_text)
        if config is None:
            if len(self._configs) > 1024:
                self._configs.clear()
            config = self._configs[config_text] = codec.config_from_text(config_text)
        return SessionHead(key, incarnation, last_sequence, config)

    async def _open(self) -> aiosqlite.Connection:
        async with self._opening:
            if self._db is None:
                db = await aiosqlite.connect(self._sqlite_path)
                await db.execute("PRAGMA query_only=1")
                await db.execute("PRAGMA busy_timeout=5000")
                self._db = db
            return self._db

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await db.close()


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
            record = event_record(event, keys, content_to_proto)
            if record.is_compaction:
                self.compaction_index = len(self.records)
            self.records.append(record)
            added += _RECORD_OVERHEAD + (2 * record.body.size if record.body is not None else 0)
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
