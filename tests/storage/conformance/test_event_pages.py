"""The store contract, newest-first reads (ports.EventPages): pages below a
sequence, the latest compaction, and a bounded build over a long history
that reads only the pages its budget reaches, on every backend."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentctx_common.errors import NotFound
from context_service.building.history import HistoryCache
from context_service.building.tail import TailReader
from context_service.domain.config import OverflowMode, SelectionPolicy
from context_service.domain.model import Event, SessionKey, Usage
from context_service.domain.selection import effective_policy, secret_keys, select
from context_service.domain.session_records import head_of
from context_service.mapping.wire import render
from context_service.ports import SessionStore
from tests.sessions.helpers import text_event
from tests.storage.conformance.support import KEY, new_session
from tests.storage.conformance.test_sessions import _compaction_event


class RowCounter:
    """The store, counting the events its reads return."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.rows = 0

    async def list_events_before(self, key: SessionKey, **kw: Any) -> list[Event]:
        events = await self.store.list_events_before(key, **kw)
        self.rows += len(events)
        return events

    async def latest_compaction(self, key: SessionKey) -> Event | None:
        event = await self.store.latest_compaction(key)
        self.rows += event is not None
        return event

    async def list_events(self, key: SessionKey, **kw: Any) -> list[Event]:
        events = await self.store.list_events(key, **kw)
        self.rows += len(events)
        return events


async def test_pages_below_a_sequence_newest_first_and_the_latest_compaction(store: SessionStore) -> None:
    await new_session(store)
    assert await store.latest_compaction(KEY) is None
    assert await store.list_events_before(KEY, before_sequence=0, limit=3) == []
    await store.append_events(KEY, [text_event(f"e{i}") for i in range(1, 6)])
    first = (await store.append_event(KEY, _compaction_event("sum1", 2))).event
    summary = (await store.append_event(KEY, _compaction_event("sum2", 5))).event
    await store.append_event(KEY, text_event("e8"))
    newest = await store.list_events_before(KEY, before_sequence=0, limit=3)
    assert [e.sequence for e in newest] == [6, 7, 8]
    assert [e.sequence for e in await store.list_events_before(KEY, before_sequence=6, limit=3)] == [3, 4, 5]
    assert [e.sequence for e in await store.list_events_before(KEY, before_sequence=3, limit=3)] == [1, 2]
    assert await store.list_events_before(KEY, before_sequence=1, limit=3) == []
    assert newest[0] == first and await store.latest_compaction(KEY) == summary
    missing = SessionKey("shop", "alice", "nope")
    with pytest.raises(NotFound):
        await store.list_events_before(missing, before_sequence=0, limit=3)
    with pytest.raises(NotFound):
        await store.latest_compaction(missing)


def _turn(i: int) -> list[Event]:
    reply = dataclasses.replace(text_event(f"r{i}", f"answer {i}", role="model"), usage=Usage(prompt_tokens=30 * i))
    return [text_event(f"q{i}", f"question {i} " + "x" * 60), reply]


async def test_a_bounded_build_reads_the_pages_its_budget_reaches_and_selects_what_a_full_read_does(
    store: SessionStore,
) -> None:
    await new_session(store)
    turns = 1_500  # 3,000 events
    for start in range(0, turns, 250):
        await store.append_events(KEY, [e for i in range(start, start + 250) for e in _turn(i)])
    policy = effective_policy(None, SelectionPolicy(max_bytes=8_000, overflow=OverflowMode.TRUNCATE))
    keys = secret_keys(policy)
    head = head_of(await store.get_session(KEY))
    counter = RowCounter(store)
    reader = TailReader(counter, render)
    bounded, _ = await reader.select(head, keys, [], policy)
    assert counter.rows <= reader.page + 1  # one page and the compaction head, of 3,000 events

    view = await HistoryCache(store, render).load(head, keys)
    full = select(view.records, [], policy)
    assert [r.event_id for r in bounded.events] == [r.event_id for r in full.events]
    assert (bounded.history_bytes, bounded.bytes_per_token, bounded.units_selected) == (
        full.history_bytes, full.bytes_per_token, full.units_selected,
    )
