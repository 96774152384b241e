"""The store contract, sessions: create, get, update, delete, listing and
paging, shared state, heads and lifecycle facts, on every backend
(ports.SessionStore, SessionHeads, LifecycleReader)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from agentctx_common.errors import AlreadyExists, InvalidArgument, NotFound
from context_service.domain.config import CachePolicy, ContextConfig, SelectionPolicy
from context_service.domain.model import (
    Checkpoint,
    Compaction,
    CompactionTrigger,
    Event,
    EventKind,
    SessionKey,
)
from context_service.domain.paging import ORDER_UPDATE, SessionQuery
from context_service.ports import SessionStore
from context_service.storage.factory import Backend
from tests.sessions.helpers import text_event
from tests.storage.conformance.support import KEY, new_session, text_at


async def test_create_get_update_delete(store: SessionStore) -> None:
    config = ContextConfig(model="m", selection=SelectionPolicy(max_bytes=100))
    created = await store.create_session(KEY, state={"cart": [1, 2]}, config=config)
    got = await store.get_session(KEY)
    assert got == created
    assert (got.event_count, got.last_sequence, got.state, got.config) == (0, 0, {"cart": [1, 2]}, config)

    with pytest.raises(AlreadyExists) as exists:
        await store.create_session(KEY, state={}, config=ContextConfig())
    assert exists.value.reason == "SESSION_ALREADY_EXISTS"

    updated = await store.update_session(
        KEY, state={"cart": []}, config=ContextConfig(cache=CachePolicy(enabled=True)), config_fields=["cache"],
        expected_etag=created.etag,
    )
    assert updated.etag != created.etag
    assert updated.state == {"cart": []}
    assert updated.config == dataclasses.replace(config, cache=CachePolicy(enabled=True))
    assert await store.get_session(KEY) == updated

    await store.append_event(KEY, text_event("e1"))
    await store.delete_session(KEY, expected_etag=(await store.get_session(KEY)).etag)
    with pytest.raises(NotFound) as gone:
        await store.get_session(KEY)
    assert gone.value.reason == "SESSION_NOT_FOUND"
    with pytest.raises(NotFound):
        await store.list_events(KEY)
    # A new session under the old name starts empty, with a new etag lineage.
    again = await store.create_session(KEY, state={}, config=ContextConfig())
    assert await store.list_events(KEY) == []
    assert again.etag != created.etag


async def test_missing_sessions_are_not_found(store: SessionStore) -> None:
    for call in (
        store.get_session(KEY), store.update_session(KEY, state={}), store.delete_session(KEY),
        store.append_event(KEY, text_event("e1")), store.list_events(KEY), store.get_event(KEY, "e1"),
    ):
        with pytest.raises(NotFound):
            await call


def _compaction_event(event_id: str, end: int) -> Event:
    checkpoint = Checkpoint(1, "cp", CompactionTrigger.MANUAL, end, "e1", f"e{end}", None, None, "f" * 64, 0, 7, 0, "extractive")
    return Event(
        id=event_id, author="compactor", kind=EventKind.COMPACTION,
        compaction=Compaction(1, end, "", end + 1, "summary", checkpoint),
    )


async def test_list_events_after_a_sequence_and_without_compactions(store: SessionStore) -> None:
    await new_session(store)
    for i in range(1, 6):
        await store.append_event(KEY, text_event(f"e{i}"))
    summary = (await store.append_event(KEY, _compaction_event("sum", 5))).event
    await store.append_event(KEY, text_event("e7"))
    assert summary.sequence == 6 and summary.compaction is not None
    assert [e.sequence for e in await store.list_events(KEY, after_sequence=4, limit=2)] == [5, 6]
    without = await store.list_events(KEY, include_compactions=False)
    assert [e.id for e in without] == ["e1", "e2", "e3", "e4", "e5", "e7"]
    assert (await store.list_events(KEY))[5] == summary


async def test_list_sessions_pages_in_creation_order_across_inserts(store: SessionStore) -> None:
    names = []
    for i in range(5):
        user = "alice" if i % 2 == 0 else "bob"
        await new_session(store, SessionKey("shop", user, f"s{i}"))
        names.append(f"apps/shop/users/{user}/sessions/s{i}")
    await new_session(store, SessionKey("other", "alice", "x"))
    query = SessionQuery(frozenset({"shop"}), None)
    first = await store.list_sessions(query, page_size=2)
    assert [r.key.name for r in first.sessions] == names[:2]
    # Sessions created while paging show up on a later page; none repeat.
    await new_session(store, SessionKey("shop", "carol", "late"))
    seen = [r.key.name for r in first.sessions]
    token = first.next_page_token
    while token:
        page = await store.list_sessions(query, page_size=2, page_token=token)
        seen += [r.key.name for r in page.sessions]
        token = page.next_page_token
    assert seen == [*names, "apps/shop/users/carol/sessions/late"]

    alice = await store.list_sessions(SessionQuery(frozenset({"shop"}), "alice"), page_size=10)
    assert [r.key.session for r in alice.sessions] == ["s0", "s2", "s4"]
    every = await store.list_sessions(SessionQuery(None, "alice"), page_size=10)
    assert {r.key.app for r in every.sessions} == {"shop", "other"}
    assert (await store.list_sessions(SessionQuery(frozenset(), None), page_size=10)).sessions == []
    with pytest.raises(InvalidArgument):  # a token is bound to its query
        await store.list_sessions(SessionQuery(frozenset({"other"}), None), page_size=2, page_token=first.next_page_token)


async def test_list_sessions_by_update_time_moves_an_updated_session_behind(store: SessionStore) -> None:
    for sid in ("a", "b", "c"):
        await new_session(store, SessionKey("shop", "alice", sid))
    await store.append_event(SessionKey("shop", "alice", "a"), text_at(
        "e1", dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)))
    query = SessionQuery(frozenset({"shop"}), "alice", order=ORDER_UPDATE)
    first = await store.list_sessions(query, page_size=2)
    rest = await store.list_sessions(query, page_size=2, page_token=first.next_page_token)
    assert [r.key.session for r in [*first.sessions, *rest.sessions]] == ["b", "c", "a"]
    assert rest.next_page_token == ""


async def test_list_events_after_a_time_and_most_recent(store: SessionStore) -> None:
    await new_session(store)
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    for i in range(1, 6):
        await store.append_event(KEY, text_at(f"e{i}", start + dt.timedelta(seconds=i)))
    assert [e.id for e in await store.list_events(KEY, most_recent=2)] == ["e4", "e5"]
    after = await store.list_events(KEY, after_time=start + dt.timedelta(seconds=3))
    assert [e.id for e in after] == ["e3", "e4", "e5"]
    assert [e.id for e in await store.list_events(KEY, after_time=start + dt.timedelta(seconds=2), most_recent=3,
                                                  limit=2)] == ["e3", "e4"]
    assert all(e.create_time is not None and e.create_time.tzinfo is not None for e in after)


async def test_shared_state_is_per_app_and_per_user(store: SessionStore) -> None:
    assert await store.get_shared_state("shop", "alice") == ({}, {})
    created = await store.create_session(KEY, state={"s": 1}, config=ContextConfig(),
                                         app_state={"theme": "dark"}, user_state={"n": 1})
    assert (created.app_state, created.user_state) == ({"theme": "dark"}, {"n": 1})
    # Merged by key into what is there; another user shares only the app's.
    again = await store.create_session(SessionKey("shop", "alice", "s2"), state={}, config=ContextConfig(),
                                       app_state={"lang": "en"})
    assert (again.app_state, again.user_state) == ({"theme": "dark", "lang": "en"}, {"n": 1})
    bob = await store.create_session(SessionKey("shop", "bob", "s1"), state={}, config=ContextConfig())
    assert (bob.app_state, bob.user_state) == ({"theme": "dark", "lang": "en"}, {})
    assert await store.get_shared_state("shop", "alice") == ({"theme": "dark", "lang": "en"}, {"n": 1})
    assert await store.get_shared_state("other", "alice") == ({}, {})
    listed = await store.list_sessions(SessionQuery(frozenset({"shop"}), None), page_size=10)
    assert [(r.key.user, r.user_state) for r in listed.sessions] == [("alice", {"n": 1}), ("alice", {"n": 1}),
                                                                      ("bob", {})]
    # Deleting a session leaves the shared states.
    await store.delete_session(KEY)
    assert (await store.get_shared_state("shop", "alice"))[1] == {"n": 1}


async def test_heads_read_what_the_store_holds(stores: Backend) -> None:
    config = ContextConfig(model="m", selection=SelectionPolicy(max_bytes=100))
    created = await stores.sessions.create_session(KEY, state={}, config=config)
    head = await stores.heads.get(KEY)
    assert (head.key, head.last_sequence, head.config) == (KEY, 0, config)
    await stores.sessions.append_event(KEY, text_event("e1"))
    assert (await stores.heads.get(KEY)).last_sequence == 1
    # A session made again under the same name is another incarnation.
    await stores.sessions.delete_session(KEY)
    with pytest.raises(NotFound) as gone:
        await stores.heads.get(KEY)
    assert gone.value.reason == "SESSION_NOT_FOUND"
    await stores.sessions.create_session(KEY, state={}, config=config)
    assert (await stores.heads.get(KEY)).incarnation != head.incarnation
    assert created.etag != (await stores.sessions.get_session(KEY)).etag


async def test_lifecycle_facts_count_events_and_compactions(stores: Backend) -> None:
    with pytest.raises(NotFound):
        await stores.lifecycle.lifecycle_facts(KEY)
    await new_session(stores.sessions)
    for i in range(1, 6):
        await stores.sessions.append_event(KEY, text_event(f"e{i}"))
    await stores.sessions.append_event(KEY, _compaction_event("sum", 5))
    facts = await stores.lifecycle.lifecycle_facts(KEY)
    assert (facts.event_count, facts.compaction_count, facts.pending_compaction_jobs) == (6, 1, 0)
    assert facts.history.latest_compaction is not None and facts.history.latest_compaction.id == "sum"
    assert await stores.jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)
    assert (await stores.lifecycle.lifecycle_facts(KEY)).pending_compaction_jobs == 1
