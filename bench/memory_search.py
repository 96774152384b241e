"""Memory search: latency at scale and recall on a labelled set, lexical
ranking (SQLite FTS5 bm25, PostgreSQL tsvector ts_rank) and fused ranking
(reciprocal rank fusion of the lexical rank and the cosine rank of the
local simulator's embeddings, ``local-sim-embed``).

For each backend (``sqlite``; ``postgres`` when 127.0.0.1:5432 answers, or
always with AGENTCTX_REQUIRE_POSTGRES=1) and each ``--sizes`` value N, one
app and user get N generated entries (a Zipfian vocabulary, 8 to 30 words
each; bulk-inserted into the migrated tables, the way the store writes
them, so the search index is the triggers' or the generated column's), then
``--queries`` searches of 3 to 8 words (limit 10) run through the store
port (``store_p50_ms``; baseline: one entry read by key, interleaved,
``store_over_get``) and through SearchMemory on a real context server on
127.0.0.1 port 0 over mTLS (``rpc_p50_ms``, ``rpc_p95_ms``; baseline: a
health check on the same channel, interleaved, ``rpc_over_floor``).

Recall: a labelled set of 100 people with 8 facts each (800 entries; job,
city, pet, hobby, allergy, birth year, car, studies) and 100 questions with
a known answer. Half the questions share a word with their answer besides
the name ("Where does Ana live?" / "Ana lives in Porto": stemming matches),
half do not ("What is Ana's occupation?" / "Ana works as a nurse"): a
lexical ranker finds those only among the person's eight facts.
``recall_at_5`` over all 100, and ``recall_at_5_overlap`` /
``recall_at_5_paraphrase`` per half; ``recall_at_5_in_N``: the same set
inside the largest corpus (another user's noise does not count: it is the
same user's N entries).

Fused (semantic mode): entries are loaded with the local simulator's
vectors (the store's packed form) while the corpus is at most
``--fused-max`` entries (default 10k: computing 1M simulator vectors in
Python takes longer than the rest of the run; larger corpora are left
lexical-only and not measured fused). The store ranks at most the user's
newest ``memory_store.VECTOR_SCAN_MAX`` (100k) vectors per search, so a
fused search's time and memory stop growing there whatever the corpus. ``fused_recall_at_5`` (and per
half) on the labelled set, ``fused_recall_at_5_in_N`` inside the corpus,
and ``fused_store_p50_ms`` / ``fused_over_lexical`` (the same queries,
through ``MemoryService.search`` with the simulator's embedder in process:
the query's embedding, both rankings and the fusion, against the lexical
store search measured interleaved). The simulator hashes words, word stems
and trigrams: it finds what shares a stem ("allergy"/"allergic"), not a
paraphrase ("occupation"/"works as"), so fused recall is what this
simulator gives, not what a provider's embedding model would.

Aims (issue 22): p50 under 10 ms at 10k entries and under 50 ms at 1M, on
both backends. The default sizes are 10k and 100k; ``--sizes 10000,1000000``
runs the 1M case (minutes of loading).

Loading goes through the migrated tables in batches of 5000 rows
(``load_s_N``, apart from the search figures); ``load_average`` is the
machine's 1-minute load before and after each backend.

Run: ``.venv/bin/python -m bench.memory_search [--sizes 10000,100000]
[--backends sqlite,postgres]`` from the repository root. The last line is
one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.memory.v1 import memory_service_pb2 as mpb
from agentctx.memory.v1 import memory_service_pb2_grpc
from agentctx_common.certs import init_dev_certs
from cache_service.domain.ports import EmbedCall
from cache_service.providers.local.adapter import LocalProvider, embed_text
from context_service.domain.memory import MemoryKey, MemoryQuery, SemanticMemory, normalized, pack_vector, query_terms
from context_service.memory.service import MemoryService
from context_service.settings import ContextSettings
from context_service.storage import schema
from context_service.storage.engine import create_engine
from context_service.storage.factory import open_backend
from context_service.storage.tables import memories
from tests.support import postgres
from tests.support.servers import context_settings, secure_channel, start_context

APP, USER = "bench", "u1"
EMBED_MODEL = "local-sim-embed"
LABELLED_USER = "labelled"
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
SEED = 22

# --- the corpus ----------------------------------------------------------------------


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ren", "sto", "va", "qui", "bel", "dor", "un", "tes", "pra", "zo", "fen", "ar",
                 "mel", "gri", "tho", "ces", "wan"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def corpus(n: int, words: list[str], rng: random.Random) -> Iterator[str]:
    # Zipf-like: word i drawn with weight 1/(i+1).
    weights = [1 / (i + 1) for i in range(len(words))]
    for _ in range(n):
        yield " ".join(rng.choices(words, weights, k=rng.randint(8, 30)))


def queries(count: int, words: list[str], rng: random.Random) -> list[str]:
    weights = [1 / (i + 1) ** 0.5 for i in range(len(words))]
    return [" ".join(rng.choices(words, weights, k=rng.randint(3, 8))) for _ in range(count)]


NAMES = ["Ana", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas"]
SURNAMES = ["Alves", "Berg", "Costa", "Dahl", "Eriksen", "Fontaine", "Gallo", "Haas", "Ivanova", "Jensen"]
JOBS = ["nurse", "carpenter", "pilot", "chemist", "librarian", "architect", "baker", "translator", "geologist", "welder"]
CITIES = ["Porto", "Lyon", "Graz", "Tartu", "Bergen", "Split", "Ghent", "Brno", "Turku", "Cork"]
PETS = ["parrot", "beagle", "tortoise", "ferret", "cat", "goldfish", "hamster", "iguana", "poodle", "rabbit"]
HOBBIES = ["climbing", "chess", "pottery", "sailing", "birdwatching", "fencing", "knitting", "rowing", "tango", "origami"]
FOODS = ["peanuts", "shellfish", "gluten", "sesame", "strawberries", "soy", "eggs", "mustard", "celery", "kiwi"]
CARS = ["hatchback", "pickup", "van", "convertible", "roadster", "minivan", "coupe", "sedan", "jeep", "estate"]
COLORS = ["red", "blue", "green", "silver", "black", "white", "yellow", "orange", "grey", "brown"]
SUBJECTS = ["physics", "history", "law", "biology", "music", "economics", "philosophy", "medicine", "art", "geology"]

# (fact template, question sharing a word besides the name, paraphrase sharing only the name)
FACTS = {
    "job": ("{n} works as a {job} at the hospital district office", "Where does {n} work?",
            "What is {n}'s occupation?"),
    "city": ("{n} lives in {city} near the old harbour", "Where does {n} live?", "Which town is {n}'s home?"),
    "pet": ("{n} has a pet {pet} that sleeps all day", "What pet does {n} have?", "Which animal keeps {n} company?"),
    "hobby": ("{n} enjoys {hobby} on weekends", "What does {n} enjoy doing?", "How does {n} spend free time?"),
    "allergy": ("{n} is allergic to {food}", "What is {n} allergic to?", "Which foods make {n} ill?"),
    "born": ("{n} was born in {year}", "When was {n} born?", "How old is {n}?"),
    "car": ("{n} drives a {color} {car}", "What car does {n} drive?", "Which vehicle belongs to {n}?"),
    "studies": ("{n} studied {subject} at university", "What did {n} study?", "What was {n}'s degree in?"),
}


def labelled_set(rng: random.Random) -> tuple[dict[str, str], list[tuple[str, str, bool]]]:
    """(entry id -> text, [(question, answer id, shares a word)]): 100
    people x 8 facts, 100 questions (50 sharing a word, 50 paraphrased)."""
    people = [f"{first} {last}" for first in NAMES for last in SURNAMES]
    entries: dict[str, str] = {}
    for i, person in enumerate(people):
        values = {"n": person, "job": rng.choice(JOBS), "city": rng.choice(CITIES), "pet": rng.choice(PETS),
                  "hobby": rng.choice(HOBBIES), "food": rng.choice(FOODS), "year": str(1950 + rng.randrange(60)),
                  "color": rng.choice(COLORS), "car": rng.choice(CARS), "subject": rng.choice(SUBJECTS)}
        for kind, (fact, _, _) in FACTS.items():
            entries[f"p{i}-{kind}"] = fact.format(**values)
    questions = []
    for i, person in enumerate(people):
        kind = rng.choice(sorted(FACTS))
        overlap = i % 2 == 0
        _, shared, paraphrase = FACTS[kind]
        questions.append(((shared if overlap else paraphrase).format(n=person), f"p{i}-{kind}", overlap))
    return entries, questions


# --- loading and measuring ------------------------------------------------------------


class LocalEmbeddings:
    """ports.EmbeddingPort on the local simulator, in process."""

    def __init__(self) -> None:
        self.provider = LocalProvider()

    async def embed(self, provider: str, model: str, texts: Any, *, query: bool, dimensions: int | None = None,
                    remaining: float | None = None) -> list[list[float]]:
        result = await self.provider.embed(EmbedCall(model, tuple(texts), dimensions=dimensions))
        return [list(v) for v in result.vectors]


def fused_service(backend: Any) -> MemoryService:
    return MemoryService(backend.memory, backend.sessions, semantic=SemanticMemory(EMBED_MODEL),
                         embeddings=LocalEmbeddings())


async def bulk_load(url: str, user: str, texts: Iterator[tuple[str, str]], batch: int = 5000,
                    vectors: bool = False) -> float:
    """Inserts (id, text) rows for (APP, user), with the simulator's
    vectors when ``vectors``; seconds taken."""
    engine = create_engine(url)
    started = time.perf_counter()
    try:
        rows: list[dict[str, Any]] = []

        async def flush() -> None:
            async with engine.begin() as conn:
                await conn.execute(sa.insert(memories), rows)
            rows.clear()

        for memory_id, text in texts:
            row = {"app": APP, "user_id": user, "memory_id": memory_id, "text": text, "metadata_json": "{}",
                   "session_id": "", "event_id": "", "author": "", "create_time": T0}
            if vectors:
                row.update(embedding=pack_vector(normalized(embed_text(text))), embedding_model=EMBED_MODEL)
            rows.append(row)
            if len(rows) >= batch:
                await flush()
        if rows:
            await flush()
        if engine.dialect.name == "postgresql":
            async with engine.connect() as conn:
                await conn.execute(sa.text("ANALYZE memories"))
                await conn.commit()
    finally:
        await engine.dispose()
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(url: str, tmp: pathlib.Path, certs: pathlib.Path, user: str, texts: list[str],
                  labelled: list[tuple[str, str, bool]] | None, first_id: str, fused: bool = False) -> dict[str, Any]:
    settings = ContextSettings(database_url=url, data_dir=tmp / "data", dev_plaintext=True, host="127.0.0.1")
    backend = await open_backend(settings)
    out: dict[str, Any] = {}
    try:
        store_ms, get_ms = [], []
        known = MemoryKey(APP, user, first_id)
        for text in texts[:5]:  # warm-up
            await backend.memory.search(MemoryQuery(APP, user, query_terms(text), {}, 10))
        for text in texts:
            # Interleaved with its baseline (one entry read by key), so both
            # see the same load on a shared machine.
            started = time.perf_counter()
            await backend.memory.get(known)
            get_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await backend.memory.search(MemoryQuery(APP, user, query_terms(text), {}, 10))
            store_ms.append((time.perf_counter() - started) * 1000)
        out["store_p50_ms"] = round(statistics.median(store_ms), 3)
        out["store_get_p50_ms"] = round(statistics.median(get_ms), 3)
        out["store_over_get"] = round(statistics.median(store_ms) / statistics.median(get_ms), 2)
        if fused:
            out.update(await measure_fused(backend, user, texts))
        if labelled is not None:
            out.update(await recall(backend.memory, user, labelled))
            if fused:
                found = await recall(fused_service(backend), user, labelled)
                out.update({f"fused_{k}": v for k, v in found.items()})
    finally:
        await backend.close()
    server = await start_context(context_settings(certs, tmp, database_url=url))
    try:
        async with secure_channel(server.port, certs) as channel:
            stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
            parent = f"apps/{APP}/users/{user}"
            for text in texts[:5]:
                await stub.SearchMemory(mpb.SearchMemoryRequest(parent=parent, query=text, limit=10))
            health = health_pb2_grpc.HealthStub(channel)
            rpc_ms, floor_ms = [], []
            for text in texts:
                # Baseline: a health check on the same channel, interleaved.
                started = time.perf_counter()
                await health.Check(health_pb2.HealthCheckRequest())
                floor_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await stub.SearchMemory(mpb.SearchMemoryRequest(parent=parent, query=text, limit=10))
                rpc_ms.append((time.perf_counter() - started) * 1000)
    finally:
        await server.stop(None)
    out["rpc_p50_ms"] = round(statistics.median(rpc_ms), 3)
    out["rpc_p95_ms"] = round(percentile(rpc_ms, 0.95), 3)
    out["rpc_floor_p50_ms"] = round(statistics.median(floor_ms), 3)
    out["rpc_over_floor"] = round(statistics.median(rpc_ms) / statistics.median(floor_ms), 2)
    return out


async def measure_fused(backend: Any, user: str, texts: list[str], count: int = 50) -> dict[str, Any]:
    """Fused searches (the query's embedding, both rankings, the fusion)
    against lexical store searches, interleaved."""
    service = fused_service(backend)
    lexical_ms, fused_ms = [], []
    for text in texts[:count]:
        query = MemoryQuery(APP, user, query_terms(text), {}, 10, text)
        started = time.perf_counter()
        await backend.memory.search(query)
        lexical_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        result = await service.search(query)
        fused_ms.append((time.perf_counter() - started) * 1000)
        assert result.ranking.value == "FUSED"
    return {"fused_store_p50_ms": round(statistics.median(fused_ms), 3),
            "fused_over_lexical": round(statistics.median(fused_ms) / statistics.median(lexical_ms), 2)}


async def recall(store: Any, user: str, labelled: list[tuple[str, str, bool]]) -> dict[str, float]:
    """Recall@5 through ``store.search`` (a MemoryStore: lexical; a
    MemoryService: its ranking)."""
    hits = {True: 0, False: 0}
    totals = {True: 0, False: 0}
    for question, answer, overlap in labelled:
        found = await store.search(MemoryQuery(APP, user, query_terms(question), {}, 5, question))
        matches = found.matches if hasattr(found, "matches") else found
        hits[overlap] += answer in [m.record.key.memory_id for m in matches]
        totals[overlap] += 1
    return {
        "recall_at_5": round((hits[True] + hits[False]) / (totals[True] + totals[False]), 3),
        "recall_at_5_overlap": round(hits[True] / totals[True], 3),
        "recall_at_5_paraphrase": round(hits[False] / totals[False], 3),
    }


async def run_backend(name: str, url: str, sizes: list[int], query_count: int, tmp: pathlib.Path,
                      certs: pathlib.Path, fused_max: int) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        await schema.upgrade(engine)
    finally:
        await engine.dispose()
    rng = random.Random(SEED)
    words = vocabulary(rng)
    entries, questions = labelled_set(random.Random(SEED))
    figures: dict[str, Any] = {"load_average_before": round(os.getloadavg()[0], 2)}
    await bulk_load(url, LABELLED_USER, iter(entries.items()), vectors=True)
    labelled_only = await measure(url, tmp, certs, LABELLED_USER, [q for q, _, _ in questions], questions,
                                  next(iter(entries)), fused=True)
    figures["labelled_entries"] = len(entries)
    figures["labelled_questions"] = len(questions)
    figures.update({k: v for k, v in labelled_only.items() if "recall" in k})
    figures["labelled_store_p50_ms"] = labelled_only["store_p50_ms"]
    figures["labelled_fused_store_p50_ms"] = labelled_only["fused_store_p50_ms"]
    figures["labelled_fused_over_lexical"] = labelled_only["fused_over_lexical"]
    texts = queries(query_count, words, rng)
    loaded = 0
    for size in sorted(sizes):
        seconds = 0.0
        fused = size <= fused_max
        if not loaded:
            # The labelled set is part of the corpus: the user's first entries.
            seconds += await bulk_load(url, USER, iter(entries.items()), vectors=fused)
            loaded = len(entries)
        fresh = corpus(max(0, size - loaded), words, rng)
        seconds += await bulk_load(url, USER, ((f"n{loaded + i}", text) for i, text in enumerate(fresh)),
                                   vectors=fused)
        loaded = max(size, loaded)
        fused_recall = fused and not any(s <= fused_max for s in sizes if s > size)
        result = await measure(url, tmp, certs, USER, texts,
                               questions if size == max(sizes) or fused_recall else None, next(iter(entries)),
                               fused=fused)
        label = f"{size // 1000}k" if size < 1_000_000 else f"{size // 1_000_000}m"
        figures[f"load_s_{label}"] = round(seconds, 1)
        for key, value in result.items():
            suffix = f"_in_{label}" if "recall" in key else f"_{label}"
            figures[key + suffix] = value
        print(f"{name} {label}: {json.dumps(result)}", file=sys.stderr, flush=True)
    figures["load_average_after"] = round(os.getloadavg()[0], 2)
    return figures


async def main_async(sizes: list[int], query_count: int, fused_max: int,
                     backends: tuple[str, ...] = ("sqlite", "postgres")) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": sizes, "queries": query_count, "ranking": "lexical and fused",
                           "fused_max": fused_max, "embedding_model": EMBED_MODEL}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        if "sqlite" in backends:
            out["sqlite"] = await run_backend("sqlite", f"sqlite:///{tmp / 'memory.db'}", sizes, query_count,
                                              tmp / "sqlite", certs, fused_max)
        if "postgres" in backends and (postgres.available() or os.environ.get("AGENTCTX_REQUIRE_POSTGRES") == "1"):
            name, url = postgres.create_database()
            try:
                out["postgres"] = await run_backend("postgres", url, sizes, query_count, tmp / "postgres", certs,
                                                    fused_max)
            finally:
                postgres.drop_database(name)
        elif "postgres" in backends:
            out["postgres"] = {"skipped": "no PostgreSQL on 127.0.0.1:5432"}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--fused-max", type=int, default=10_000,
                        help="largest corpus loaded with vectors and measured fused")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = tuple(args.backends.split(","))
    print(json.dumps(asyncio.run(main_async(sizes, args.queries, args.fused_max, backends)), sort_keys=True))


if __name__ == "__main__":
    main()
