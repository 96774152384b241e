"""What one group-commit batch of appends does, independent of the driver.

``plan`` is a generator: it yields the database operations it needs, in
order, receives each one's result, and returns one result or error per
append. The SQLite executor runs it inside its writer thread in one hop;
the PostgreSQL executor awaits each operation. One place holds the rules:
dedup by event id and fingerprint, the expected-etag check, and sequence
numbers that go up by one per stored event.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from agentctx_common.errors import Aborted, AlreadyExists, NotFound
from agentctx_common.reasons import Reason
from context_service.domain.model import Event, SessionKey
from context_service.domain.session_records import AppendResult, session_update_time
from context_service.storage import codec


@dataclass(frozen=True, slots=True)
class Append:
    key: SessionKey
    event: Event  # id set; create_time None means "the commit time"
    expected_etag: str | None
    body: str
    fingerprint: str


@dataclass(slots=True)
class Live:
    """A locked session row while a transaction changes it."""

    pk: int
    incarnation: str
    version: int
    last_sequence: int
    event_count: int
    touched: bool = False
    update_time: dt.datetime | None = None

    @property
    def etag(self) -> str:
        return codec.etag(self.incarnation, self.version)


# --- the operations a plan asks for ------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockSessions:
    """-> [(pk, app, user_id, session_id, incarnation, version, last_sequence,
    event_count)] of those that exist, locked, in pk order."""

    keys: Sequence[SessionKey]


@dataclass(frozen=True, slots=True)
class StoredFingerprints:
    """-> [(session_pk, event_id, fingerprint)] for the stored events among
    the (pks[i], ids[i]) pairs."""

    pks: Sequence[int]
    ids: Sequence[str]


@dataclass(frozen=True, slots=True)
class InsertEvents:
    rows: Sequence[dict[str, Any]]  # codec.event_row


@dataclass(frozen=True, slots=True)
class UpdateSessions:
    rows: Sequence[tuple[int, int, int, dt.datetime, int]]  # version, last_sequence, event_count, update_time, pk


@dataclass(frozen=True, slots=True)
class LoadEvent:
    """-> a row of the events table (attribute access), for codec.event_from_row."""

    pk: int
    event_id: str


Op = LockSessions | StoredFingerprints | InsertEvents | UpdateSessions | LoadEvent
Plan = Generator[Op, Any, list[AppendResult | Exception]]


def not_found(key: SessionKey) -> NotFound:
    return NotFound(f"session {key.name} not found", reason=Reason.SESSION_NOT_FOUND)


def etag_mismatch(current: str) -> Aborted:
    return Aborted(
        "the session changed since the etag was read", reason=Reason.ETAG_MISMATCH, metadata={"current_etag": current}
    )


def plan(items: Sequence[Append], now: dt.datetime) -> Plan:
    keys = sorted({item.key for item in items}, key=lambda k: (k.app, k.user, k.session))
    live = {
        SessionKey(app, user, session): Live(pk, incarnation, version, last, count)
        for pk, app, user, session, incarnation, version, last, count in (yield LockSessions(keys))
    }
    wanted = {(live[i.key].pk, i.event.id) for i in items if i.key in live}
    stored: dict[tuple[int, str], str] = {}
    if wanted:
        pairs = sorted(wanted)
        found = yield StoredFingerprints([p for p, _ in pairs], [e for _, e in pairs])
        stored = {(pk, event_id): fingerprint for pk, event_id, fingerprint in found}

    results: list[AppendResult | Exception | None] = []
    replays: list[tuple[int, SessionKey, str]] = []  # (result index, session, event id)
    pending: dict[tuple[int, str], tuple[str, Event]] = {}
    rows: list[dict[str, Any]] = []
    for item in items:
        s = live.get(item.key)
        if s is None:
            results.append(not_found(item.key))
            continue
        ident = (s.pk, item.event.id)
        earlier = pending.get(ident)
        fingerprint = earlier[0] if earlier else stored.get(ident)
        if fingerprint is not None:
            # A retry: the stored event, even if the etag moved on since.
            if fingerprint == item.fingerprint:
                replays.append((len(results), item.key, item.event.id))
                results.append(None)
            else:
                results.append(AlreadyExists(
                    f"event id {item.event.id} is already stored with different content", reason=Reason.EVENT_ID_CONFLICT
                ))
            continue
        if item.expected_etag is not None and item.expected_etag != s.etag:
            results.append(etag_mismatch(s.etag))
            continue
        s.version += 1
        s.last_sequence += 1
        s.event_count += 1
        s.touched = True
        create_time = item.event.create_time or now
        event = dataclasses.replace(item.event, sequence=s.last_sequence, create_time=create_time)
        updated = session_update_time(now, create_time)
        s.update_time = updated if s.update_time is None else max(s.update_time, updated)
        rows.append(codec.event_row(
            event, session_pk=s.pk, sequence=s.last_sequence, create_time=create_time,
            body=item.body, fingerprint=item.fingerprint,
        ))
        pending[ident] = (item.fingerprint, event)
        results.append(AppendResult(event, s.etag, session_update_time=s.update_time))

    if rows:
        yield InsertEvents(rows)
        yield UpdateSessions([
            (s.version, s.last_sequence, s.event_count, s.update_time or now, s.pk) for s in live.values() if s.touched
        ])
    for index, key, event_id in replays:
        ident = (live[key].pk, event_id)
        event = pending[ident][1] if ident in pending else codec.event_from_row((yield LoadEvent(*ident)))
        results[index] = AppendResult(event, live[key].etag, deduplicated=True)
    done: list[AppendResult | Exception] = []
    for r in results:
        assert r is not None  # every replay's slot was filled above
        done.append(r)
    return done
