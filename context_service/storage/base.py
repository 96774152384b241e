"""The session store interface every area of the context service uses.

Implementations return domain types and raise agentctx_common.errors:
NotFound (SESSION_NOT_FOUND), AlreadyExists (SESSION_ALREADY_EXISTS,
EVENT_ID_CONFLICT), Aborted (ETAG_MISMATCH, current etag in metadata),
Unavailable (DATABASE_UNAVAILABLE / DATABASE_BUSY, with retry_after).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Protocol

from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, JsonObject, SessionKey
from context_service.domain.sessions import AppendResult, SessionPage, SessionQuery, SessionRecord, StateDelta


class SessionStore(Protocol):
    async def create_session(self, key: SessionKey, *, state: JsonObject, config: ContextConfig,
                             app_state: JsonObject | None = None, user_state: JsonObject | None = None) -> SessionRecord:
        """Stores a new, empty session (ALREADY_EXISTS when the key is taken),
        merging ``app_state``/``user_state`` by key into the shared states."""
        ...

    async def get_shared_state(self, app: str, user: str) -> tuple[JsonObject, JsonObject]:
        """(the app's shared state, the user's in the app); empty when unset."""
        ...

    async def get_session(self, key: SessionKey) -> SessionRecord: ...

    async def list_sessions(self, query: SessionQuery, *, page_size: int, page_token: str = "") -> SessionPage:
        """Oldest first, in a stable order; tokens are opaque and bound to
        ``query``. Sessions created while paging appear on later pages."""
        ...

    async def update_session(
        self,
        key: SessionKey,
        *,
        state: JsonObject | None = None,
        config: ContextConfig | None = None,
        config_fields: Collection[str] = ("model", "selection", "compaction", "cache"),
        expected_etag: str | None = None,
    ) -> SessionRecord:
        """Replaces the state (when given) and the named top-level fields of
        the config (when given), atomically, as one new etag."""
        ...

    async def delete_session(self, key: SessionKey, *, expected_etag: str | None = None) -> None:
        """Removes the session and all of its events."""
        ...

    async def append_event(self, key: SessionKey, event: Event, *, expected_etag: str | None = None,
                           state_delta: StateDelta | None = None) -> AppendResult:
        """Stores ``event`` with the next sequence; on disk when it returns.

        ``event.id`` must be set (domain.sessions.prepare_event). An id that
        is already stored returns the stored event (deduplicated) when the
        content is the same, even if the etag moved on; different content
        is ALREADY_EXISTS, reason EVENT_ID_CONFLICT. ``create_time`` is
        set to the commit time when None. The store does not check who may
        append what: COMPACTION events are ordinary rows (kind COMPACTION,
        body as JSON). A ``state_delta`` is merged by key into the session's
        and the shared states in the event's transaction (not on a retry).
        """
        ...

    async def get_event(self, key: SessionKey, event_id: str) -> Event | None: ...

    async def list_events(
        self,
        key: SessionKey,
        *,
        after_sequence: int = 0,
        limit: int | None = None,
        include_compactions: bool = True,
        after_time: dt.datetime | None = None,
        most_recent: int = 0,
    ) -> list[Event]:
        """Events with a sequence above ``after_sequence`` (created at or
        after ``after_time``; only the ``most_recent`` newest when
        positive), in sequence order."""
        ...

    async def close(self) -> None: ...
