"""The session store as the application sees it, with every event this
process appends handed to the history cache as it is acknowledged, so the
build that follows an append (every turn's) reads no rows.

Everything but the two appends is the store's own. Appends made any other
way (another replica or worker process, a compaction commit) are read by
the cache's next load, from its last cached sequence, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from context_service.building.history import HistoryCache
from context_service.building.tail import TailReader
from context_service.domain.model import Event, SessionKey
from context_service.domain.session_records import AppendResult, StateDelta
from context_service.domain.tool_tokens import OpenCall
from context_service.ports import SessionStore


class ObservedSessions:
    def __init__(self, store: SessionStore, history: HistoryCache, tail: TailReader | None = None) -> None:
        self._store = store
        self._history = history
        self._tail = tail

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append_event(
        self, key: SessionKey, event: Event, *, expected_etag: str | None = None, state_delta: StateDelta | None = None,
        open_calls: Sequence[OpenCall] = (),
    ) -> AppendResult:
        result = await self._store.append_event(key, event, expected_etag=expected_etag, state_delta=state_delta,
                                                open_calls=open_calls)
        if not result.deduplicated:
            self._history.appended(key, (result.event,))
            if self._tail is not None:
                self._tail.appended(key, (result.event,))
        return result

    async def append_events(self, key: SessionKey, events: Sequence[Event]) -> list[AppendResult]:
        results = await self._store.append_events(key, events)
        stored = sorted((r.event for r in results if not r.deduplicated), key=lambda e: e.sequence)
        if stored:
            self._history.appended(key, stored)
            if self._tail is not None:
                self._tail.appended(key, stored)
        return results
