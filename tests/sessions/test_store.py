"""The SQL store on SQLite and PostgreSQL: sessions, sequences, etags,
idempotent appends, paging, and concurrent appenders."""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest

from agentctx_common.errors import Aborted, AlreadyExists, InvalidArgument, NotFound
from context_service.domain.config import CachePolicy, ContextConfig, SelectionPolicy
from context_service.domain.model import (
    Checkpoint,
    Compaction,
    CompactionTrigger,
    Event,
    EventKind,
    SessionKey,
)
from context_service.domain.paging import SessionQuery
from context_service.storage.sql_store import SqlSessionStore
from tests.sessions.helpers import call_event, response_event, text_event

KEY = SessionKey("shop", "alice", "s1")


async def _session(store: SqlSessionStore, key: SessionKey = KEY, **state: object) -> str:
    return (await store.create_session(key, state=dict(state), config=ContextConfig())).etag


async def test_create_get_update_delete(store: SqlSessionStore) -> None:
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


async def test_missing_sessions_are_not_found(store: SqlSessionStore) -> None:
    for call in (
        store.get_session(KEY), store.update_session(KEY, state={}), store.delete_session(KEY),
        store.append_event(KEY, text_event("e1")), store.list_events(KEY), store.get_event(KEY, "e1"),
    ):
        with pytest.raises(NotFound):
            await call


async def test_etag_mismatch_is_aborted_with_the_current_etag(store: SqlSessionStore) -> None:
    etag = await _session(store)
    appended = await store.append_event(KEY, text_event("e1"), expected_etag=etag)
    for stale in (
        store.append_event(KEY, text_event("e2"), expected_etag=etag),
        store.update_session(KEY, state={"x": 1}, expected_etag=etag),
        store.delete_session(KEY, expected_etag=etag),
    ):
        with pytest.raises(Aborted) as info:
            await stale
        assert info.value.reason == "ETAG_MISMATCH"
        assert info.value.metadata == {"current_etag": appended.session_etag}
    # Nothing changed.
    session = await store.get_session(KEY)
    assert (session.etag, session.last_sequence, session.state) == (appended.session_etag, 1, {})


async def test_a_retried_append_returns_the_stored_event(store: SqlSessionStore) -> None:
    etag = await _session(store)
    first = await store.append_event(KEY, text_event("e1", "hi"), expected_etag=etag)
    await store.append_event(KEY, text_event("e2"))
    # Same id, same content: the stored event, even though the etag moved on.
    retry = await store.append_event(KEY, text_event("e1", "hi"), expected_etag=etag)
    assert retry.deduplicated
    assert retry.event == first.event
    assert retry.session_etag == (await store.get_session(KEY)).etag
    # Same id, different content: refused.
    with pytest.raises(AlreadyExists) as info:
        await store.append_event(KEY, text_event("e1", "changed"))
    assert info.value.reason == "EVENT_ID_CONFLICT"
    assert [e.id for e in await store.list_events(KEY)] == ["e1", "e2"]


async def test_sequences_stay_contiguous_under_32_concurrent_appenders(store: SqlSessionStore) -> None:
    await _session(store)
    per_appender = 12

    async def appender(n: int) -> list[int]:
        sequences = []
        for i in range(per_appender):
            event = text_event(f"a{n}-{i}")
            result = await store.append_event(KEY, event)
            if i % 4 == 0:  # a retry in the middle must not add anything
                assert (await store.append_event(KEY, event)).deduplicated
            sequences.append(result.event.sequence)
        return sequences

    results = await asyncio.gather(*(appender(n) for n in range(32)))
    total = 32 * per_appender
    assert sorted(s for r in results for s in r) == list(range(1, total + 1))
    for r in results:  # each appender's events are in its own order
        assert r == sorted(r)
    stored = await store.list_events(KEY)
    assert [e.sequence for e in stored] == list(range(1, total + 1))
    assert len({e.id for e in stored}) == total
    session = await store.get_session(KEY)
    assert (session.event_count, session.last_sequence) == (total, total)


async def test_one_batch_spanning_sessions_keeps_each_sequence(store: SqlSessionStore) -> None:
    keys = [SessionKey("shop", f"u{i % 3}", f"s{i}") for i in range(6)]
    for key in keys:
        await _session(store, key)
    missing = SessionKey("shop", "nobody", "none")
    jobs = [store.append_event(key, text_event(f"e{j}")) for j in range(10) for key in keys]
    jobs.append(store.append_event(missing, text_event("x")))
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert isinstance(results[-1], NotFound)
    for key in keys:
        assert [e.sequence for e in await store.list_events(key)] == list(range(1, 11))


async def test_conflicts_inside_one_batch(store: SqlSessionStore) -> None:
    etag = await _session(store)
    results = await asyncio.gather(
        store.append_event(KEY, text_event("same", "a"), expected_etag=etag),
        store.append_event(KEY, text_event("other"), expected_etag=etag),
        store.append_event(KEY, text_event("same", "a")),
        store.append_event(KEY, text_event("same", "b")),
        return_exceptions=True,
    )
    assert not results[0].deduplicated
    assert isinstance(results[1], Aborted)  # the first append moved the etag
    assert results[2].deduplicated and results[2].event == results[0].event
    assert isinstance(results[3], AlreadyExists)
    assert [e.id for e in await store.list_events(KEY)] == ["same"]


async def test_function_calls_and_responses_round_trip(store: SqlSessionStore) -> None:
    await _session(store)
    call = (await store.append_event(KEY, call_event("c"))).event
    response = (await store.append_event(KEY, response_event("r"))).event
    assert await store.list_events(KEY) == [call, response]
    assert await store.get_event(KEY, "r") == response
    assert await store.get_event(KEY, "nope") is None


def _compaction_event(event_id: str, end: int) -> Event:
    checkpoint = Checkpoint(1, "cp", CompactionTrigger.MANUAL, end, "e1", f"e{end}", None, None, "f" * 64, 0, 7, 0, "extractive")
    return Event(
        id=event_id, author="compactor", kind=EventKind.COMPACTION,
        compaction=Compaction(1, end, "", end + 1, "summary", checkpoint),
    )


async def test_list_events_after_a_sequence_and_without_compactions(store: SqlSessionStore) -> None:
    await _session(store)
    for i in range(1, 6):
        await store.append_event(KEY, text_event(f"e{i}"))
    summary = (await store.append_event(KEY, _compaction_event("sum", 5))).event
    await store.append_event(KEY, text_event("e7"))
    assert summary.sequence == 6 and summary.compaction is not None
    assert [e.sequence for e in await store.list_events(KEY, after_sequence=4, limit=2)] == [5, 6]
    without = await store.list_events(KEY, include_compactions=False)
    assert [e.id for e in without] == ["e1", "e2", "e3", "e4", "e5", "e7"]
    assert (await store.list_events(KEY))[5] == summary


async def test_list_sessions_pages_in_creation_order_across_inserts(store: SqlSessionStore) -> None:
    names = []
    for i in range(5):
        user = "alice" if i % 2 == 0 else "bob"
        await _session(store, SessionKey("shop", user, f"s{i}"))
        names.append(f"apps/shop/users/{user}/sessions/s{i}")
    await _session(store, SessionKey("other", "alice", "x"))
    query = SessionQuery(frozenset({"shop"}), None)
    first = await store.list_sessions(query, page_size=2)
    assert [r.key.name for r in first.sessions] == names[:2]
    # Sessions created while paging show up on a later page; none repeat.
    await _session(store, SessionKey("shop", "carol", "late"))
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


async def test_random_interleavings_keep_the_invariants(store: SqlSessionStore) -> None:
    """Appends, retries, stale etags and updates in random order: sequences
    stay 1..n, each id is stored once, and a retry never adds an event."""
    rng = random.Random(7)
    etag = await _session(store)
    ids: list[str] = []
    ops = []
    for i in range(120):
        roll = rng.random()
        if roll < 0.6 or not ids:
            ids.append(f"e{i}")
            ops.append(store.append_event(KEY, text_event(ids[-1])))
        elif roll < 0.8:
            ops.append(store.append_event(KEY, text_event(rng.choice(ids))))
        elif roll < 0.9:
            ops.append(store.append_event(KEY, text_event(f"stale{i}"), expected_etag=etag))
        else:
            ops.append(store.update_session(KEY, state={"i": i}))
    await asyncio.gather(*ops, return_exceptions=True)
    stored = await store.list_events(KEY)
    assert [e.sequence for e in stored] == list(range(1, len(stored) + 1))
    assert len({e.id for e in stored}) == len(stored)
    assert set(ids) <= {e.id for e in stored}
    assert (await store.get_session(KEY)).last_sequence == len(stored)
