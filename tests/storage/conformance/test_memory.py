"""The store contract, memory (ports.MemoryStore) on every backend: adding
(idempotent by id and by source event), getting, deleting, owners kept
apart, metadata filters, ranking on a labelled mini set, and query text
that would be syntax in FTS5 or tsquery matched as words."""

from __future__ import annotations

import datetime as dt
import pathlib
import random

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_common.errors import AlreadyExists, NotFound
from context_service.domain.memory import MemoryKey, MemoryQuery, NewMemory, fts5_match, query_terms
from context_service.ports import MemoryStore
from context_service.settings import ContextSettings
from context_service.storage.engine import create_engine
from context_service.storage.factory import Backend, open_backend
from context_service.storage.memory_store import SqlMemoryStore

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


@pytest.fixture
def memory(stores: Backend) -> MemoryStore:
    return stores.memory


def entry(memory_id: str, text: str, *, app: str = "shop", user: str = "alice", **metadata: str) -> NewMemory:
    return NewMemory(MemoryKey(app, user, memory_id), text, metadata, create_time=T0)


def query(text: str, *, app: str = "shop", user: str = "alice", limit: int = 10, **filters: str) -> MemoryQuery:
    return MemoryQuery(app, user, query_terms(text), filters, limit)


async def test_add_get_delete(memory: MemoryStore) -> None:
    added = await memory.add(entry("m1", "Alice prefers window seats", topic="travel"))
    assert await memory.get(added.key) == added
    assert (added.metadata, added.create_time) == ({"topic": "travel"}, T0)
    # The same entry again is the stored one; another under the id is refused.
    assert await memory.add(entry("m1", "Alice prefers window seats", topic="travel")) == added
    with pytest.raises(AlreadyExists) as exists:
        await memory.add(entry("m1", "Alice prefers aisle seats"))
    assert exists.value.reason == "MEMORY_ALREADY_EXISTS"
    await memory.delete(added.key)
    for call in (memory.get(added.key), memory.delete(added.key)):
        with pytest.raises(NotFound) as gone:
            await call
        assert gone.value.reason == "MEMORY_NOT_FOUND"
    assert await memory.search(query("window seats")) == []


async def test_from_session_is_idempotent_per_event(memory: MemoryStore) -> None:
    def from_event(memory_id: str, event_id: str, text: str) -> NewMemory:
        return NewMemory(MemoryKey("shop", "alice", memory_id), text, session_id="s1", event_id=event_id,
                         author="user", create_time=T0)

    first = await memory.add_from_session([from_event("a", "e1", "likes green tea"), from_event("b", "e2", "hates coffee")])
    assert (first.added, first.existing) == (2, 0)
    again = await memory.add_from_session([from_event("c", "e1", "likes green tea"), from_event("d", "e3", "owns a cat")])
    assert (again.added, again.existing) == (1, 1)
    matches = await memory.search(query("tea"))
    assert [(m.record.key.memory_id, m.record.session_id, m.record.event_id) for m in matches] == [("a", "s1", "e1")]
    assert matches[0].record.session_name == "apps/shop/users/alice/sessions/s1"
    # An explicit entry for an event already in memory is refused too.
    with pytest.raises(AlreadyExists):
        await memory.add(from_event("x", "e2", "something else"))


async def test_owners_are_apart(memory: MemoryStore) -> None:
    await memory.add(entry("m1", "the launch code is blue falcon"))
    await memory.add(entry("m2", "blue falcon for bob", user="bob"))
    await memory.add(entry("m3", "blue falcon in another app", app="bank"))
    for app, user, expected in (("shop", "alice", "m1"), ("shop", "bob", "m2"), ("bank", "alice", "m3")):
        found = await memory.search(query("blue falcon", app=app, user=user))
        assert [m.record.key.memory_id for m in found] == [expected]
    with pytest.raises(NotFound):
        await memory.delete(MemoryKey("bank", "alice", "m1"))
    assert (await memory.get(MemoryKey("shop", "alice", "m1"))).text == "the launch code is blue falcon"


async def test_metadata_filters_and_limit(memory: MemoryStore) -> None:
    for i in range(6):
        await memory.add(entry(f"m{i}", f"note {i} about the garden", kind="even" if i % 2 == 0 else "odd",
                               year="2026"))
    found = await memory.search(query("garden", kind="odd", year="2026"))
    assert sorted(m.record.key.memory_id for m in found) == ["m1", "m3", "m5"]
    assert await memory.search(query("garden", kind="odd", year="2025")) == []
    assert len(await memory.search(query("garden", limit=2))) == 2


# A labelled mini set: each question's answer is the entry named.
FACTS = {
    "f1": "Alice's passport number expires in March 2027",
    "f2": "The team standup happens every weekday at 9:30 in room Orion",
    "f3": "Alice is allergic to peanuts and shellfish",
    "f4": "Bob's favourite programming language is Rust",
    "f5": "The production database runs PostgreSQL 16 on three replicas",
    "f6": "Alice's daughter plays violin in the school orchestra",
    "f7": "The quarterly budget review is scheduled for the second Tuesday of January",
    "f8": "Alice drives a blue electric hatchback",
}
QUESTIONS = {
    "When does my passport expire?": "f1",
    "what time is the standup meeting": "f2",
    "Which foods am I allergic to?": "f3",
    "what language does Bob like for programming": "f4",
    "how many replicas does the production database have": "f5",
    "what instrument does my daughter play": "f6",
    "when is the budget review": "f7",
    "what car do I drive": "f8",
}


async def test_ranking_on_a_labelled_set(memory: MemoryStore) -> None:
    for memory_id, text in FACTS.items():
        await memory.add(entry(memory_id, text))
    for i in range(20):
        await memory.add(entry(f"noise{i}", f"an unrelated remark number {i} about weather and lunch"))
    top1 = 0
    for question, answer in QUESTIONS.items():
        found = await memory.search(query(question, limit=5))
        ids = [m.record.key.memory_id for m in found]
        assert answer in ids, (question, ids)
        assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
        top1 += ids[0] == answer
    assert top1 >= len(QUESTIONS) - 1
    # Stemming on both backends: "drives" is found by "driving".
    assert (await memory.search(query("driving")))[0].record.key.memory_id == "f8"


# The search as one statement over the whole rows (the store's form before
# it ranked (pk, score) first): the store must answer the same entries in
# the same order with the same scores.
_REFERENCE = {
    "sqlite": "SELECT memories.memory_id, -bm25(memories_fts) AS score FROM memories_fts "
              "JOIN memories ON memories.pk = memories_fts.rowid "
              "WHERE memories_fts MATCH :match AND memories.app = :app AND memories.user_id = :user {filters}"
              "ORDER BY score DESC, memories.pk LIMIT :limit",
    "postgresql": "SELECT memories.memory_id, ts_rank(memories.tsv, {tsquery}) AS score FROM memories "
                  "WHERE memories.tsv @@ {tsquery} AND memories.app = :app AND memories.user_id = :user {filters}"
                  "ORDER BY score DESC, memories.pk LIMIT :limit",
}


async def _reference_search(engine: sa.ext.asyncio.AsyncEngine, q: MemoryQuery) -> list[tuple[str, float]]:
    params: dict[str, object] = {"app": q.app, "user": q.user, "limit": q.limit, "match": fts5_match(q.terms)}
    filters = ""
    for i, (k, v) in enumerate(sorted(q.metadata_filter.items())):
        filters += (f"AND EXISTS (SELECT 1 FROM memory_metadata WHERE memory_pk = memories.pk "
                    f"AND key = :k{i} AND value = :v{i}) ")
        params |= {f"k{i}": k, f"v{i}": v}
    tsquery = " || ".join(f"plainto_tsquery('english', :t{i})" for i in range(len(q.terms)))
    params |= {f"t{i}": t for i, t in enumerate(q.terms)}
    sql = _REFERENCE[engine.dialect.name].format(filters=filters, tsquery=f"({tsquery})")
    if engine.dialect.name == "sqlite":
        params = {k: v for k, v in params.items() if not k.startswith("t")}
    else:
        del params["match"]
    async with engine.connect() as conn:
        return [(r.memory_id, float(r.score)) for r in await conn.execute(sa.text(sql), params)]


async def test_ranking_is_the_whole_row_statements(memory: MemoryStore, db_url: str) -> None:
    """Ranking (pk, score) first and reading the best rows after answers
    what one statement over the whole rows answers: same entries, order
    (ties by insertion: texts repeat) and scores, with owners, filters and
    limits."""
    rng = random.Random(7)
    words = ["apple", "river", "stone", "garden", "light", "paper", "window", "cloud", "horse", "music", "salt",
             "bridge", "winter", "copper", "lantern", "meadow", "orbit", "pepper", "quartz", "saddle"]
    texts = [" ".join(rng.choices(words, k=rng.randint(2, 9))) for _ in range(60)]
    for i in range(240):
        user = rng.choice(["alice", "alice", "alice", "bob"])
        await memory.add(entry(f"m{i}", rng.choice(texts), user=user, kind=rng.choice(["a", "b"])))
    engine = create_engine(db_url)
    try:
        for n in range(60):
            filters = {"kind": rng.choice(["a", "b"])} if n % 3 == 0 else {}
            q = query(" ".join(rng.sample(words, rng.randint(1, 4))), user=rng.choice(["alice", "bob"]),
                      limit=rng.choice([1, 3, 10, 50]), **filters)
            found = [(m.record.key.memory_id, m.score) for m in await memory.search(q)]
            assert found == await _reference_search(engine, q), q
            assert found
    finally:
        await engine.dispose()


# SQLite only: PostgreSQL ranks from the heap rows (ts_rank reads the tsvector there).
@pytest.mark.parametrize("backend", ["sqlite"])
async def test_sqlite_search_reads_owners_from_the_narrow_index(memory: MemoryStore, db_url: str) -> None:
    """On SQLite each match's owner comes from (pk, app, user_id), never
    the entry's row (text, metadata, vector): 1.5x faster at 1M entries."""
    assert db_url.startswith("sqlite")
    await memory.add(entry("m1", "river stone", kind="a"))
    assert isinstance(memory, SqlMemoryStore)
    seen: list[tuple[str, object]] = []

    def capture(conn: object, cursor: object, statement: str, params: object, context: object, many: bool) -> None:
        if "bm25" in statement:
            seen.append((statement, params))

    sync_engine = memory._store.engine.sync_engine
    sa.event.listen(sync_engine, "before_cursor_execute", capture)
    try:
        for filters in ({}, {"kind": "a"}):
            assert [m.record.key.memory_id for m in await memory.search(query("river", **filters))] == ["m1"]
    finally:
        sa.event.remove(sync_engine, "before_cursor_execute", capture)
    assert len(seen) == 2
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:
            for statement, params in seen:
                plan = [r[3] for r in await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)]
                # The ranking (before the best rows are read by key).
                ranking = plan[:plan.index("SCAN best")]
                assert any("COVERING INDEX ix_memories_pk_owner" in step for step in ranking), plan
                assert not any("INTEGER PRIMARY KEY" in step for step in ranking), plan
    finally:
        await engine.dispose()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from('abc "*^:()-+ORNADNEAR{}\'&|!<>'), min_size=1, max_size=30))
async def test_query_text_is_never_syntax(memory: MemoryStore, text: str) -> None:
    # Whatever the text, a search either matches words or finds nothing.
    await memory.search(query(text))


# --- vectors (semantic mode) -------------------------------------------------------------


def _axis(i: int, dims: int = 4, scale: float = 1.0) -> list[float]:
    return [scale if j == i else 0.0 for j in range(dims)]


async def test_vectors_rank_by_cosine_per_model_owner_and_filter(memory: MemoryStore) -> None:
    for memory_id, text, topic in (("v1", "red apples", "fruit"), ("v2", "green pears", "fruit"),
                                   ("v3", "blue cars", "cars"), ("v4", "no vector here", "fruit")):
        await memory.add(entry(memory_id, text, topic=topic))
    await memory.add(entry("other", "someone else's", user="bob"))
    key = lambda memory_id, user="alice": MemoryKey("shop", user, memory_id)  # noqa: E731
    stored = await memory.set_vectors("emb-a", [
        (key("v1"), _axis(0, scale=3.0)),  # stored at unit length
        (key("v2"), [0.6, 0.8, 0.0, 0.0]),
        (key("v3"), _axis(1)),
        (key("gone"), _axis(0)),  # no such entry: skipped
    ])
    assert stored == 3
    await memory.set_vectors("emb-a", [(key("other", "bob"), _axis(0))])
    found = await memory.vector_search(query("anything"), "emb-a", _axis(0, scale=2.0), 10)
    assert [(m.record.key.memory_id, round(m.score, 5)) for m in found] == [("v1", 1.0), ("v2", 0.6), ("v3", 0.0)]
    assert [m.record.key.memory_id for m in await memory.vector_search(query("x"), "emb-a", _axis(0), 1)] == ["v1"]
    # Filters as the lexical search's; another model's vectors are not compared.
    cars = await memory.vector_search(query("x", topic="cars"), "emb-a", _axis(0), 10)
    assert [m.record.key.memory_id for m in cars] == ["v3"]
    assert await memory.vector_search(query("x"), "emb-b", _axis(0), 10) == []
    # A new model's vector replaces the old one; entries without one stay lexical.
    await memory.set_vectors("emb-b", [(key("v2"), _axis(2))])
    assert [m.record.key.memory_id for m in await memory.vector_search(query("x"), "emb-b", _axis(2), 10)] == ["v2"]
    assert [m.record.key.memory_id for m in await memory.search(query("vector"))] == ["v4"]


async def test_entries_added_from_a_session_are_returned_for_embedding(memory: MemoryStore) -> None:
    def from_event(memory_id: str, event_id: str, text: str) -> NewMemory:
        return NewMemory(MemoryKey("shop", "alice", memory_id), text, session_id="s9", event_id=event_id,
                         create_time=T0)

    first = await memory.add_from_session([from_event("a", "e1", "one"), from_event("b", "e2", "two")])
    again = await memory.add_from_session([from_event("c", "e2", "two"), from_event("d", "e3", "three")])
    assert [e.key.memory_id for e in first.entries] == ["a", "b"]
    assert [e.key.memory_id for e in again.entries] == ["d"]


async def test_cached_vectors_follow_changes_made_by_another_replica(stores: Backend, db_url: str,
                                                                     tmp_path: pathlib.Path) -> None:
    """One process keeps a copy of a user's vectors; a change made through
    another (a replica on the same database) is seen at its next search."""
    other = await open_backend(ContextSettings(database_url=db_url, data_dir=tmp_path / "other", dev_plaintext=True,
                                               host="127.0.0.1"))
    try:
        here, there = stores.memory, other.memory
        for memory_id in ("a", "b", "c"):
            await here.add(entry(memory_id, f"entry {memory_id}"))
        await here.set_vectors("emb", [(MemoryKey("shop", "alice", "a"), _axis(0)),
                                       (MemoryKey("shop", "alice", "b"), _axis(1))])

        async def nearest(store: MemoryStore, axis: int) -> list[str]:
            return [m.record.key.memory_id for m in await store.vector_search(query("x"), "emb", _axis(axis), 1)]

        assert await nearest(here, 0) == ["a"] and await nearest(here, 2) == ["a"]  # ties: the oldest
        await there.set_vectors("emb", [(MemoryKey("shop", "alice", "c"), _axis(2))])
        assert await nearest(here, 2) == ["c"]
        await there.delete(MemoryKey("shop", "alice", "a"))
        assert await nearest(here, 0) == ["b"]
        # With a filter the vectors are read, not the copy.
        await there.add(entry("d", "entry d", topic="t"))
        await there.set_vectors("emb", [(MemoryKey("shop", "alice", "d"), _axis(3))])
        found = await here.vector_search(query("x", topic="t"), "emb", _axis(0), 5)
        assert [m.record.key.memory_id for m in found] == ["d"]
    finally:
        await other.close()


async def test_a_vector_search_ranks_the_newest_vectors_only(stores: Backend) -> None:
    """The bound: the owner's newest ``vector_scan_max`` vectors of the
    model (after filters) are ranked, older ones are not read; within the
    bound the ranking is the unbounded one."""
    bounded = SqlMemoryStore(stores.sessions, vector_scan_max=3)  # type: ignore[arg-type]
    for i in range(6):
        await bounded.add(entry(f"e{i}", f"entry {i}", topic="odd" if i % 2 else "even"))
    # The oldest entries are the nearest: e0 and e1 on axis 0.
    await bounded.set_vectors("emb", [(MemoryKey("shop", "alice", f"e{i}"), _axis(0 if i < 2 else 1, scale=i + 1))
                                      for i in range(6)])
    async def nearest(store: MemoryStore) -> list[str]:
        return [m.record.key.memory_id for m in await store.vector_search(query("x"), "emb", _axis(0), 10)]

    # e3, e4, e5 ranked (ties by insertion); e0..e2 are beyond the bound.
    assert await nearest(bounded) == ["e3", "e4", "e5"]
    assert await nearest(bounded) == ["e3", "e4", "e5"]  # the cached copy
    assert await nearest(stores.memory) == ["e0", "e1", "e2", "e3", "e4", "e5"]
    # With a filter the bound counts the entries that pass it.
    odd = await bounded.vector_search(query("x", topic="odd"), "emb", _axis(0), 10)
    assert [m.record.key.memory_id for m in odd] == ["e1", "e3", "e5"]
    # Entries named (a fused search's lexical candidates) are ranked past the
    # bound, once, if they pass the filters and belong to the owner.
    named = [MemoryKey("shop", "alice", i) for i in ("e0", "e2", "e4")] + [MemoryKey("shop", "bob", "e1")]
    found = await bounded.vector_search(query("x"), "emb", _axis(0), 10, also=named)
    assert [(m.record.key.memory_id, round(m.score, 5)) for m in found] == [
        ("e0", 1.0), ("e2", 0.0), ("e3", 0.0), ("e4", 0.0), ("e5", 0.0)]
    assert [m.record.key.memory_id for m in await bounded.vector_search(query("x"), "emb", _axis(0), 2,
                                                                         also=named)] == ["e0", "e2"]
    even = await bounded.vector_search(query("x", topic="even"), "emb", _axis(0), 10, also=named[:2])
    assert [m.record.key.memory_id for m in even] == ["e0", "e2", "e4"]
    odd = await bounded.vector_search(query("x", topic="odd"), "emb", _axis(0), 10, also=named[:2])
    assert [m.record.key.memory_id for m in odd] == ["e1", "e3", "e5"]


# PostgreSQL only: SQLite's FTS5 index has no pending list.
@pytest.mark.parametrize("backend", ["postgres"])
async def test_postgres_search_never_scans_a_gin_pending_list(memory: MemoryStore, db_url: str) -> None:
    """New entries go into the GIN index at once (migration 0011): with
    the default pending list, every search scanned the entries added since
    the last merge, unsorted (9 ms against 3 at 10k entries)."""
    assert db_url.startswith("postgresql")
    for i in range(20):
        await memory.add(entry(f"m{i}", f"river stone {i}"))
    engine = create_engine(db_url)
    try:
        async with engine.connect() as conn:
            options = (await conn.exec_driver_sql(
                "SELECT reloptions FROM pg_class WHERE relname = 'ix_memories_tsv'")).scalar()
            assert options is not None and "fastupdate=off" in options
    finally:
        await engine.dispose()
    assert len(await memory.search(query("river", limit=50))) == 20
