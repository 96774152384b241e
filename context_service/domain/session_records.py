"""What storage returns for a session: the stored record, the head selection
reads, an append's result and the state delta merged with an event.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from context_service.domain.config import ContextConfig
from context_service.domain.model import (
    Event,
    JsonObject,
    SessionKey,
)


@dataclass(frozen=True)
class SessionRecord:
    """A stored session. ``config`` is what the client set (unset fields take
    the server defaults at use time); ``etag`` changes on every write."""

    key: SessionKey
    state: JsonObject
    config: ContextConfig
    etag: str
    create_time: dt.datetime
    update_time: dt.datetime
    event_count: int
    last_sequence: int
    # The state every session of the app shares, and of the user in the app.
    app_state: JsonObject = field(default_factory=dict)
    user_state: JsonObject = field(default_factory=dict)


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


@dataclass(frozen=True)
class AppendResult:
    """The stored event (sequence and create_time set), the session's etag
    after the append, whether the event id was already stored, and the
    session's update time after the append (None for a deduplicated one)."""

    event: Event
    session_etag: str
    deduplicated: bool = False
    session_update_time: dt.datetime | None = None


@dataclass(frozen=True)
class StateDelta:
    """Keys merged into the session's, the user's and the app's state with
    an event, in its transaction."""

    session: JsonObject = field(default_factory=dict)
    user: JsonObject = field(default_factory=dict)
    app: JsonObject = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.session or self.user or self.app)


def session_update_time(now: dt.datetime, event_time: dt.datetime | None) -> dt.datetime:
    """A session's update time after an append: the commit time, or the
    event's own time when the client set it later (so a session reads as
    updated no earlier than its newest event, as ADK expects)."""
    return max(now, event_time) if event_time is not None else now

