"""The store contract, appends (ports.SessionStore.append_event and
append_events) on every backend: dedup by event id and content, etag
conflicts (ABORTED ETAG_MISMATCH with the current etag), gapless
sequences under concurrency, all-or-nothing batches, and state deltas
merged into the session, user and app scopes with their event."""

from __future__ import annotations

import asyncio
import random

import pytest

from agentctx_common.errors import Aborted, AlreadyExists, NotFound
from agentctx_common.reasons import Reason
from context_service.domain.config import ContextConfig
from context_service.domain.model import SessionKey
from context_service.domain.session_records import StateDelta
from context_service.ports import SessionStore
from tests.sessions.helpers import call_event, response_event, text_event
from tests.storage.conformance.support import KEY, new_session


async def test_etag_mismatch_is_aborted_with_the_current_etag(store: SessionStore) -> None:
    etag = await new_session(store)
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


async def test_a_retried_append_returns_the_stored_event(store: SessionStore) -> None:
    etag = await new_session(store)
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


async def test_sequences_stay_contiguous_under_32_concurrent_appenders(store: SessionStore) -> None:
    await new_session(store)
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


async def test_one_batch_spanning_sessions_keeps_each_sequence(store: SessionStore) -> None:
    keys = [SessionKey("shop", f"u{i % 3}", f"s{i}") for i in range(6)]
    for key in keys:
        await new_session(store, key)
    missing = SessionKey("shop", "nobody", "none")
    jobs = [store.append_event(key, text_event(f"e{j}")) for j in range(10) for key in keys]
    jobs.append(store.append_event(missing, text_event("x")))
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert isinstance(results[-1], NotFound)
    for key in keys:
        assert [e.sequence for e in await store.list_events(key)] == list(range(1, 11))


async def test_conflicts_inside_one_batch(store: SessionStore) -> None:
    etag = await new_session(store)
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


async def test_function_calls_and_responses_round_trip(store: SessionStore) -> None:
    await new_session(store)
    call = (await store.append_event(KEY, call_event("c"))).event
    response = (await store.append_event(KEY, response_event("r"))).event
    assert await store.list_events(KEY) == [call, response]
    assert await store.get_event(KEY, "r") == response
    assert await store.get_event(KEY, "nope") is None


async def test_random_interleavings_keep_the_invariants(store: SessionStore) -> None:
    """Appends, retries, stale etags and updates in random order: sequences
    stay 1..n, each id is stored once, and a retry never adds an event."""
    rng = random.Random(7)
    etag = await new_session(store)
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



# --- append_events: all or nothing ---------------------------------------------------


async def test_append_events_stores_all_with_consecutive_sequences_and_a_retry_is_deduplicated(
    store: SessionStore,
) -> None:
    await new_session(store)
    await store.append_event(KEY, text_event("before"))
    batch = [text_event(f"in-{i}", f"message {i}") for i in range(5)]
    stored = await store.append_events(KEY, batch)
    assert [r.event.sequence for r in stored] == [2, 3, 4, 5, 6]
    assert not any(r.deduplicated for r in stored)

    again = await store.append_events(KEY, batch)
    assert all(r.deduplicated for r in again)
    assert [r.event.sequence for r in again] == [2, 3, 4, 5, 6]
    session = await store.get_session(KEY)
    assert session.event_count == 6 and session.last_sequence == 6
    assert again[-1].session_etag == stored[-1].session_etag == session.etag, "a deduplicated retry changes nothing"

    # Part stored already (the same content), part new: only the new ones get sequences.
    mixed = await store.append_events(KEY, [batch[4], text_event("in-5", "message 5")])
    assert [(r.event.id, r.event.sequence, r.deduplicated) for r in mixed] == [("in-4", 6, True), ("in-5", 7, False)]


async def test_append_events_is_all_or_nothing(store: SessionStore) -> None:
    await new_session(store)
    await store.append_event(KEY, text_event("taken", "the original"))
    batch = [text_event("new-0"), text_event("taken", "other content"), text_event("new-1")]
    with pytest.raises(AlreadyExists) as info:
        await store.append_events(KEY, batch)
    assert info.value.reason is Reason.EVENT_ID_CONFLICT
    assert [e.id for e in await store.list_events(KEY)] == ["taken"]
    session = await store.get_session(KEY)
    assert session.event_count == 1 and session.last_sequence == 1

    with pytest.raises(NotFound):
        await store.append_events(SessionKey("shop", "alice", "missing"), [text_event("x")])

    # Without the conflicting one, the same batch stores everything, gapless.
    done = await store.append_events(KEY, [batch[0], batch[2]])
    assert [(r.event.id, r.event.sequence) for r in done] == [("new-0", 2), ("new-1", 3)]
    # Single appends and these share the sequence.
    assert (await store.append_event(KEY, text_event("after"))).event.sequence == 4


async def test_batches_and_single_appends_interleave_gaplessly(store: SessionStore) -> None:
    await new_session(store)
    jobs = [store.append_events(KEY, [text_event(f"b{n}-{i}") for i in range(3)]) for n in range(8)]
    jobs += [store.append_event(KEY, text_event(f"one{n}")) for n in range(16)]
    jobs += [store.append_event(KEY, text_event(f"delta{n}"), state_delta=StateDelta(session={f"k{n}": n}))
             for n in range(4)]
    await asyncio.gather(*jobs)
    stored = await store.list_events(KEY)
    assert [e.sequence for e in stored] == list(range(1, 8 * 3 + 16 + 4 + 1))
    for n in range(8):  # a batch's events are consecutive
        sequences = [e.sequence for e in stored if e.id.startswith(f"b{n}-")]
        assert sequences == list(range(sequences[0], sequences[0] + 3))
    session = await store.get_session(KEY)
    assert session.state == {f"k{n}": n for n in range(4)}
    assert (session.event_count, session.last_sequence) == (len(stored), len(stored))


# --- state deltas: session, user and app scopes --------------------------------------------


async def test_deltas_merge_by_key_into_each_scope_with_their_event(store: SessionStore) -> None:
    etag = (await store.create_session(KEY, state={"a": 1, "keep": True}, config=ContextConfig(),
                                       app_state={"theme": "dark"}, user_state={"n": 1})).etag
    delta = StateDelta(session={"a": 2}, user={"m": 2}, app={"lang": "en"})
    result = await store.append_event(KEY, text_event("e1"), expected_etag=etag, state_delta=delta)
    assert not result.deduplicated and result.event.sequence == 1 and result.session_update_time is not None
    session = await store.get_session(KEY)
    assert session.state == {"a": 2, "keep": True}
    assert (session.user_state, session.app_state) == ({"n": 1, "m": 2}, {"theme": "dark", "lang": "en"})
    assert session.etag == result.session_etag and session.last_sequence == session.event_count == 1
    # A retry of the stored id returns the stored event and applies nothing again.
    again = await store.append_event(KEY, text_event("e1"), state_delta=StateDelta(session={"a": 99}, app={"x": 1}))
    assert again.deduplicated and again.event == result.event
    assert (await store.get_session(KEY)).state["a"] == 2
    # Another user's delta reaches the app's state, not alice's.
    bob = SessionKey("shop", "bob", "s1")
    await new_session(store, bob)
    await store.append_event(bob, text_event("b1"), state_delta=StateDelta(user={"bob": True}, app={"lang": "fr"}))
    assert await store.get_shared_state("shop", "alice") == ({"theme": "dark", "lang": "fr"}, {"n": 1, "m": 2})
    assert await store.get_shared_state("shop", "bob") == ({"theme": "dark", "lang": "fr"}, {"bob": True})


async def test_a_refused_delta_append_writes_nothing(store: SessionStore) -> None:
    etag = await new_session(store, k=0)
    await store.append_event(KEY, text_event("e1", "first"))
    before = await store.get_session(KEY)
    with pytest.raises(Aborted) as stale:
        await store.append_event(KEY, text_event("e2"), expected_etag=etag,
                                 state_delta=StateDelta(session={"k": 1}, app={"k": 1}, user={"k": 1}))
    assert stale.value.reason == "ETAG_MISMATCH" and stale.value.metadata == {"current_etag": before.etag}
    with pytest.raises(AlreadyExists) as conflict:
        await store.append_event(KEY, text_event("e1", "other"), state_delta=StateDelta(session={"k": 2}))
    assert conflict.value.reason == "EVENT_ID_CONFLICT"
    with pytest.raises(NotFound):
        await store.append_event(SessionKey("shop", "alice", "none"), text_event("x"),
                                 state_delta=StateDelta(app={"k": 3}))
    assert await store.get_session(KEY) == before
    assert await store.get_shared_state("shop", "alice") == ({}, {})
    assert [e.id for e in await store.list_events(KEY)] == ["e1"]


async def test_concurrent_deltas_lose_no_key(store: SessionStore) -> None:
    keys = [SessionKey("shop", f"u{i % 2}", f"s{i}") for i in range(4)]
    for key in keys:
        await new_session(store, key)
    await asyncio.gather(*(
        store.append_event(key, text_event(f"e{n}"), state_delta=StateDelta(
            session={f"s{n}": n}, user={f"{key.session}-{n}": n}, app={f"{key.session}-{n}": n}))
        for n in range(6) for key in keys
    ))
    app_state, _ = await store.get_shared_state("shop", "u0")
    assert app_state == {f"{k.session}-{n}": n for n in range(6) for k in keys}
    for key in keys:
        session = await store.get_session(key)
        assert session.state == {f"s{n}": n for n in range(6)} and session.last_sequence == 6
        assert {k for k in session.user_state if k.startswith(key.session + "-")} == {f"{key.session}-{n}" for n in range(6)}


async def test_batches_share_group_commit_and_stay_all_or_nothing(store: SessionStore) -> None:
    """append_events runs as one unit of a group-commit batch: a unit that
    would be stored in part fails alone, and the appends batched with it
    are stored."""
    await new_session(store)
    await store.append_event(KEY, text_event("old", "stored"))
    other = SessionKey("shop", "alice", "s2")
    await new_session(store, other)
    good, bad, alone, elsewhere = await asyncio.gather(
        store.append_events(KEY, [text_event("g1"), text_event("g2")]),
        store.append_events(KEY, [text_event("b1"), text_event("old", "changed")]),
        store.append_event(KEY, text_event("a1")),
        store.append_events(other, [text_event("o1"), text_event("o2")]),
        return_exceptions=True,
    )
    assert isinstance(bad, AlreadyExists) and bad.reason == "EVENT_ID_CONFLICT"
    assert not isinstance(good, BaseException) and not isinstance(alone, BaseException)
    assert not isinstance(elsewhere, BaseException)
    assert [r.event.sequence for r in elsewhere] == [1, 2]
    stored = await store.list_events(KEY)
    assert sorted(e.id for e in stored) == ["a1", "g1", "g2", "old"]
    assert [e.sequence for e in stored] == [1, 2, 3, 4]
    assert [r.event.sequence + 1 for r in good[:1]] == [good[1].event.sequence]  # a unit's events are consecutive
    # A unit that fails whole (every append refused) stores nothing either.
    with pytest.raises(AlreadyExists):
        await store.append_events(KEY, [text_event("g1", "x"), text_event("g2", "y")])
    # A retried unit returns its stored events.
    again = await store.append_events(KEY, [text_event("g1"), text_event("g2")])
    assert [r.deduplicated for r in again] == [True, True]
    assert len(await store.list_events(KEY)) == 4
