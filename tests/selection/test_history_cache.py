"""The read-through history cache over a real SQLite store: records are
built once per event, refreshed by fetching only newer events, and dropped
when a session is deleted or recreated."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from context_service.building.history import HistoryCache
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, SessionKey
from context_service.domain.selection import DEFAULT_SECRET_KEYS, SecretKeys
from context_service.domain.session_records import head_of
from context_service.mapping.wire import render
from context_service.storage.sql_store import SqlSessionStore, open_store
from tests.selection.builders import call, text

KEY = SessionKey("app", "u", "s1")


class CountingStore:
    """The real store, counting list_events calls and what they asked for."""

    def __init__(self, store: SqlSessionStore) -> None:
        self.store = store
        self.fetches: list[int] = []

    async def list_events(self, key: SessionKey, **kw: Any) -> list[Event]:
        self.fetches.append(kw.get("after_sequence", 0))
        return await self.store.list_events(key, **kw)


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> AsyncIterator[SqlSessionStore]:
    s = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'ctx.db'}", create_if_empty=True)
    yield s
    await s.close()


async def append(store: SqlSessionStore, key: SessionKey, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        content = text("user", f"m{i}") if i % 3 else call((f"c{i}", "f", {"api_key": "k", "q": i}))
        await store.append_event(key, Event(id=f"e{i}", author="user" if i % 3 else "agent", content=content))


async def test_records_are_built_once_and_refreshed_incrementally(store: SqlSessionStore) -> None:
    await store.create_session(KEY, state={}, config=ContextConfig())
    await append(store, KEY, 5)
    spy = CountingStore(store)
    cache = HistoryCache(spy, render)
    view = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    assert [r.sequence for r in view.records] == [1, 2, 3, 4, 5]
    first = view.records[0]
    assert first.body.secrets_pruned == 1 and b"api_key" not in first.body.canonical
    assert first.body.rendered.proto.parts[0].function_call.name == "f"  # a ready-made proto

    again = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    assert spy.fetches == [0] and again.records[0] is first and cache.hits == 1

    await append(store, KEY, 2, start=5)
    grown = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    assert spy.fetches == [0, 5]
    assert [r.sequence for r in grown.records] == list(range(1, 8)) and grown.records[0] is first


async def test_a_recreated_session_is_read_afresh(store: SqlSessionStore) -> None:
    await store.create_session(KEY, state={}, config=ContextConfig())
    await append(store, KEY, 3)
    spy = CountingStore(store)
    cache = HistoryCache(spy, render)
    await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    await store.delete_session(KEY)
    await store.create_session(KEY, state={}, config=ContextConfig())
    await store.append_event(KEY, Event(id="new", author="user", content=text("user", "fresh")))
    await append(store, KEY, 2, start=10)
    view = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    assert [r.event_id for r in view.records] == ["new", "e10", "e11"]
    assert spy.fetches == [0, 0]


async def test_key_sets_have_separate_records(store: SqlSessionStore) -> None:
    await store.create_session(KEY, state={}, config=ContextConfig())
    await store.append_event(KEY, Event(id="e", author="a", content=call(("c", "f", {"q": 1, "Tenant": "t"}))))
    cache = HistoryCache(store, render)
    session = head_of(await store.get_session(KEY))
    plain = await cache.load(session, DEFAULT_SECRET_KEYS)
    strict = await cache.load(session, SecretKeys.with_extra(["tenant"]))
    assert b"Tenant" in plain.records[0].body.canonical
    assert b"Tenant" not in strict.records[0].body.canonical
    assert len(cache) == 2


async def test_the_cache_is_bounded_least_recently_used_first(store: SqlSessionStore) -> None:
    keys = [SessionKey("app", "u", f"s{i}") for i in range(4)]
    for k in keys:
        await store.create_session(k, state={}, config=ContextConfig())
        await append(store, k, 10)
    cache = HistoryCache(store, render, max_bytes=1)
    for k in keys:
        await cache.load(head_of(await store.get_session(k)), DEFAULT_SECRET_KEYS)
    assert len(cache) == 0 and cache.size == 0  # nothing fits: nothing is kept, nothing breaks
    one = HistoryCache(store, render)
    await one.load(head_of(await store.get_session(keys[0])), DEFAULT_SECRET_KEYS)
    cache = HistoryCache(store, render, max_bytes=int(one.size * 2.5))
    for k in keys:
        await cache.load(head_of(await store.get_session(k)), DEFAULT_SECRET_KEYS)
    assert len(cache) == 2 and cache.size <= cache.max_bytes
    await cache.load(head_of(await store.get_session(keys[2])), DEFAULT_SECRET_KEYS)  # touch: now newest
    await cache.load(head_of(await store.get_session(keys[0])), DEFAULT_SECRET_KEYS)
    assert cache.hits >= 1 and len(cache) == 2


async def test_compaction_position_is_tracked(store: SqlSessionStore) -> None:
    from tests.selection.builders import compaction

    await store.create_session(KEY, state={}, config=ContextConfig())
    await append(store, KEY, 3)
    c = compaction(0, "summary", first_kept=2)
    await store.append_event(KEY, Event(id="c", author="compactor", kind=c.kind, compaction=c.compaction))
    cache = HistoryCache(store, render)
    view = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    # The record before the compaction's first kept sequence (2) is let go.
    assert [r.sequence for r in view.records] == [2, 3, 4]
    assert view.compaction_index == 2 and view.records[2].is_compaction
    assert view.records[2].body.rendered.proto.parts[0].text.endswith("summary")


async def test_session_heads_read_the_same_as_the_store(store: SqlSessionStore) -> None:
    from agentctx_common.errors import NotFound
    from context_service.domain.config import OverflowMode, SelectionPolicy
    from context_service.storage.heads import SqliteSessionHeads

    config = ContextConfig(model="m1", selection=SelectionPolicy(max_bytes=99, overflow=OverflowMode.TRUNCATE))
    await store.create_session(KEY, state={"a": 1}, config=config)
    heads = SqliteSessionHeads(store, store.engine.url.database)
    try:
        assert await heads.get(KEY) == head_of(await store.get_session(KEY))
        await append(store, KEY, 2)
        head = await heads.get(KEY)
        assert head.last_sequence == 2 and head.config == config
        assert head == head_of(await store.get_session(KEY))
        await store.delete_session(KEY)
        with pytest.raises(NotFound):
            await heads.get(KEY)
        await store.create_session(KEY, state={}, config=ContextConfig())
        assert (await heads.get(KEY)).incarnation != head.incarnation
    finally:
        await heads.close()


async def test_session_heads_fall_back_to_the_store_elsewhere(store: SqlSessionStore) -> None:
    from context_service.storage.heads import StoreSessionHeads

    class Plain:  # a store with no SQLite engine: the generic path
        async def get_session(self, key: SessionKey):  # type: ignore[no-untyped-def]
            return await store.get_session(key)

    await store.create_session(KEY, state={}, config=ContextConfig())
    heads = StoreSessionHeads(Plain())
    assert await heads.get(KEY) == head_of(await store.get_session(KEY))
    await heads.close()


async def test_appends_through_the_app_extend_the_cache_without_a_read(store: SqlSessionStore) -> None:
    """An append made here is taken as is; one made elsewhere (another
    replica or process, here the raw store) leaves a gap that the next load
    reads from the last cached sequence, and the appended one after it is
    not taken out of order."""
    from context_service.building.appends import ObservedSessions

    await store.create_session(KEY, state={}, config=ContextConfig())
    await append(store, KEY, 3)
    spy = CountingStore(store)
    cache = HistoryCache(spy, render)
    sessions = ObservedSessions(store, cache)
    await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    await sessions.append_event(KEY, Event(id="here", author="user", content=text("user", "mine")))
    view = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    assert spy.fetches == [0] and [r.event_id for r in view.records][-1] == "here"

    await store.append_event(KEY, Event(id="elsewhere", author="user", content=text("user", "theirs")))
    await sessions.append_event(KEY, Event(id="here-2", author="user", content=text("user", "mine again")))
    view = await cache.load(head_of(await store.get_session(KEY)), DEFAULT_SECRET_KEYS)
    assert spy.fetches == [0, 4]
    assert [r.sequence for r in view.records] == [1, 2, 3, 4, 5, 6]
    assert [r.event_id for r in view.records][-2:] == ["elsewhere", "here-2"]
    dedup = await sessions.append_event(KEY, Event(id="here-2", author="user", content=text("user", "mine again")))
    assert dedup.deduplicated and len((await cache.load(head_of(await store.get_session(KEY)),
                                                         DEFAULT_SECRET_KEYS)).records) == 6
