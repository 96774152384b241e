"""Compaction: BuildContext latency on a busy session while background
compaction runs, against the same workload without compaction, in one run;
and the extractive compactor's fact recall.

Latency, as a paired experiment. Two context services run as their own
processes (``agentctx serve context``, mTLS, each on its own SQLite file,
compaction worker and niced extractive worker process on): "compaction",
whose sessions enable background compaction, and "baseline", whose
sessions do not; nothing else differs. Each round creates a fresh session
on both, fills both with the same history, and starts an agent process
that appends the same turns to both every 20 ms and, like the Generate
flow, asks for compaction at each turn boundary (as another replica of each
database), so durable jobs keep compacting the "compaction" session in its
server while BuildContext alternates between the two sessions, which of the
two goes first alternating too. Both replicas are timed at the same
instants, so load from elsewhere on the machine reaches both alike, while
anything compaction does inside its server (its worker, its loop, its
database) shows in that server's latencies only. BuildContext uses a fixed
history budget (TRUNCATE), so both return contexts of the same size.

Bar: busy_p99_ratio = p99(compaction) / p99(baseline) <= 1.2.

Recall. A seeded conversation plants ticket ids, UUIDs, commit hashes,
code identifiers, URLs, file paths and decisions among filler and tool
calls; ``fact_recall`` is the share that survive verbatim into the
extractive summary the service would write (keep 20,000 tokens, default
bounds); ``fact_recall_chained`` after three chained compactions.

Run: ``.venv/bin/python -m bench.compaction`` from the repository root.
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import pathlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.certs import init_dev_certs
from context_service.compaction.service import CompactionService, Compactors
from context_service.domain.compaction_rules.extractive import summarize
from context_service.domain.compaction_rules.history import history_from_events
from context_service.domain.compaction_rules.plan import CompactionPlan, plan_compaction
from context_service.domain.compaction_rules.policy import resolve
from context_service.domain.config import CompactionPolicy
from context_service.domain.model import (
    CompactionTrigger,
    Content,
    Event,
    FunctionCall,
    FunctionResponse,
    Part,
    SessionKey,
)
from context_service.settings import ContextSettings
from context_service.storage.compaction_jobs import SqlJobStore
from context_service.storage.compactions import SqlCompactionStore
from context_service.storage.sql_store import open_store
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel

APP, USER = "bench", "u"
ROUNDS = 16
BUILDS_PER_ROUND = 400
PREFILL_TURNS = 60
TURN_INTERVAL_S = 0.02
BUILD_BUDGET_TOKENS = 6_000
COMPACTING = policy_pb2.CompactionPolicy(enabled=True, background_tokens=8_000, keep_recent_tokens=4_000)
BASELINE = policy_pb2.CompactionPolicy(enabled=False, background_tokens=8_000, keep_recent_tokens=4_000)
FILLER = "The agent checked the build output and summarized what changed in the module. "


# --- latency ------------------------------------------------------------------------


def text(role: str, value: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=value)])


def turn(n: int) -> list[event_pb2.Event]:
    """One agent turn of about 2 KB: a question, a tool round, an answer."""
    call = content_pb2.Content(role="model")
    p = call.parts.add()
    p.function_call.id, p.function_call.name = f"c{n}", "read_file"
    p.function_call.args.update({"path": f"src/module_{n % 50}.py"})
    res = content_pb2.Content(role="user")
    r = res.parts.add()
    r.function_response.id, r.function_response.name = f"c{n}", "read_file"
    r.function_response.response.update({"result": FILLER * 8})
    return [
        event_pb2.Event(author="user", content=text("user", f"Step {n}: look at src/module_{n % 50}.py. " + FILLER * 3)),
        event_pb2.Event(author="agent", content=call),
        event_pb2.Event(author="user", content=res),
        event_pb2.Event(author="agent", content=text("model", f"Done with step {n}. " + FILLER * 3)),
    ]


async def append_turn(stub: Any, name: str, n: int) -> None:
    for event in turn(n):
        await stub.AppendEvent(pb.AppendEventRequest(parent=name, event=event))


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@dataclass
class Replica:
    """One context service process on its own SQLite database."""

    name: str  # "baseline" or "compaction"
    port: int
    data: pathlib.Path
    policy: policy_pb2.CompactionPolicy


def agent_process(certs: str, replicas: list[tuple[int, str]], commands: Any, replies: Any, running: Any) -> None:
    """The agent, in its own process so that its work never shares the
    measuring loop. Given one session per replica, it appends the same turn
    to each in turn and asks for compaction at each turn boundary (as the
    Generate flow does, from another replica of each database) until told
    to stop."""
    asyncio.run(_agent(pathlib.Path(certs), replicas, commands, replies, running))


async def _agent(certs: pathlib.Path, replicas: list[tuple[int, str]], commands: Any, replies: Any, running: Any) -> None:
    sides = []
    for port, data in replicas:
        settings = ContextSettings(dev_plaintext=True, data_dir=pathlib.Path(data), compaction_worker=False)
        store = await open_store(settings.resolved_database_url)
        service = CompactionService(store, SqlCompactionStore(store), Compactors(), jobs=SqlJobStore(store))
        channel = secure_channel(port, certs)
        sides.append((store, service, channel, context_service_pb2_grpc.ContextServiceStub(channel)))
    loop = asyncio.get_running_loop()
    try:
        while True:
            command = await loop.run_in_executor(None, commands.get)
            if command is None:
                return
            names, n = command
            turns = 0
            while running.is_set():
                for (_, service, _, stub), name in zip(sides, names, strict=False):
                    await append_turn(stub, name, n + turns)
                    await service.maybe_compact_at_turn_boundary(SessionKey(APP, USER, name.rsplit("/", 1)[1]))
                turns += 1
                await asyncio.sleep(TURN_INTERVAL_S)
            replies.put(turns)
    finally:
        for store, _, channel, _ in sides:
            await channel.close()
            await store.close()


async def new_session(stub: Any, policy: policy_pb2.CompactionPolicy) -> str:
    session_id = uuid.uuid4().hex[:12]
    session = session_pb2.Session()
    session.config.compaction.CopyFrom(policy)
    await stub.CreateSession(pb.CreateSessionRequest(parent=f"apps/{APP}/users/{USER}", session_id=session_id, session=session))
    return f"apps/{APP}/users/{USER}/sessions/{session_id}"


async def compaction_count(stub: Any, name: str) -> int:
    count, token = 0, ""
    while True:
        listed = await stub.ListEvents(pb.ListEventsRequest(
            parent=name, include_compactions=True, page_size=1000, page_token=token
        ))
        count += sum(e.kind == event_pb2.EVENT_KIND_COMPACTION for e in listed.events)
        token = listed.next_page_token
        if not token:
            return count


async def one_round(stubs: list[Any], replicas: list[Replica], agent: tuple[Any, Any, Any],
                    samples: dict[str, list[float]], flip: bool) -> dict[str, int]:
    """Fresh sessions with the same history on both replicas; then, while
    the agent keeps both busy, BuildContext alternates between them."""
    commands, replies, running = agent
    names = [await new_session(stub, r.policy) for stub, r in zip(stubs, replicas, strict=False)]
    for n in range(PREFILL_TURNS):
        for stub, name in zip(stubs, names, strict=False):
            await append_turn(stub, name, n)
    budget = policy_pb2.SelectionPolicy(max_tokens=BUILD_BUDGET_TOKENS, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE)
    builds = [pb.BuildContextRequest(session=name, input=[text("user", "what next?")], policy=budget) for name in names]
    for _ in range(5):  # warm each server's history cache
        for stub, build in zip(stubs, builds, strict=False):
            await stub.BuildContext(build)
    pairs = list(zip(stubs, builds, replicas, strict=False))
    running.set()
    commands.put((names, PREFILL_TURNS))
    try:
        for i in range(BUILDS_PER_ROUND):
            # The same instant for both replicas; which goes first alternates.
            for stub, build, replica in pairs if (i % 2 == 0) != flip else pairs[::-1]:
                started = time.perf_counter()
                await stub.BuildContext(build)
                samples[replica.name].append((time.perf_counter() - started) * 1e6)
    finally:
        running.clear()
        await asyncio.get_running_loop().run_in_executor(None, replies.get)
    return {r.name: await compaction_count(stub, name) for stub, name, r in zip(stubs, names, replicas, strict=False)}


async def latency(tmp: pathlib.Path) -> dict[str, Any]:
    certs = tmp / "certs"
    init_dev_certs(certs)
    replicas = [
        Replica("baseline", free_port(), tmp / "baseline", BASELINE),
        Replica("compaction", free_port(), tmp / "compaction", COMPACTING),
    ]
    procs = []
    ctx = multiprocessing.get_context("spawn")
    commands, replies, running = ctx.Queue(), ctx.Queue(), ctx.Event()
    agent = ctx.Process(
        target=agent_process,
        args=(str(certs), [(r.port, str(r.data)) for r in replicas], commands, replies, running),
    )
    channels = []
    try:
        for r in replicas:
            config = write_config(
                tmp / f"{r.name}.toml", certs, context_port=r.port, cache_port=free_port(), data_dir=r.data,
                context={"log_level": "WARNING", "compaction_job_poll_s": 0.05, "require_client_cert": True},
            )
            procs.append(spawn("context", config, tmp / f"{r.name}.log"))
        for r, proc in zip(replicas, procs, strict=False):
            wait_healthy(r.port, certs, "agent-client", proc)
        agent.start()
        channels = [secure_channel(r.port, certs) for r in replicas]
        stubs = [context_service_pb2_grpc.ContextServiceStub(ch) for ch in channels]
        samples: dict[str, list[float]] = {r.name: [] for r in replicas}
        compactions = {r.name: 0 for r in replicas}
        for round_ in range(ROUNDS):
            made = await one_round(stubs, replicas, (commands, replies, running), samples, flip=bool(round_ % 2))
            for name, count in made.items():
                compactions[name] += count
        assert compactions["baseline"] == 0, "the baseline replica must not compact"
    finally:
        for ch in channels:
            await ch.close()
        if agent.pid is not None:
            commands.put(None)
            agent.join(30)
            if agent.is_alive():
                agent.kill()
        for proc in procs:
            stop(proc)
    figures: dict[str, Any] = {}
    for phase in ("baseline", "compaction"):
        p50, p99 = quantiles(samples[phase])
        figures[f"{phase}_p50_us"], figures[f"{phase}_p99_us"] = round(p50, 1), round(p99, 1)
    figures["busy_p50_ratio"] = round(figures["compaction_p50_us"] / figures["baseline_p50_us"], 3)
    figures["busy_p99_ratio"] = round(figures["compaction_p99_us"] / figures["baseline_p99_us"], 3)
    figures["background_compactions"] = compactions["compaction"]
    figures["rounds"] = ROUNDS
    figures["builds_per_phase"] = len(samples["baseline"])
    return figures


# --- fact recall ------------------------------------------------------------------------


def seeded_conversation(seed: int = 7, turns: int = 480) -> tuple[list[Event], list[str]]:
    """A conversation with planted facts; returns the events and the facts."""
    rng = random.Random(seed)
    facts: list[str] = []
    events: list[Event] = []

    def add(author: str, content: Content) -> None:
        events.append(Event(id=f"e{len(events) + 1}", author=author, content=content, sequence=len(events) + 1))

    words = "alpha beta gamma delta service request handler queue worker cache index shard".split()
    for t in range(turns):
        kind = t % 6
        if kind == 0:
            ticket = f"{rng.choice(['PAY', 'AUTH', 'OPS', 'DATA'])}-{rng.randint(100, 9999)}"
            facts.append(ticket)
            prose = " ".join(rng.choice(words) for _ in range(40))
            add("user", Content("user", (Part(text=f"Please look into {ticket}; {prose}."),)))
        elif kind == 1:
            path = f"src/{rng.choice(words)}/{rng.choice(words)}_{rng.randint(1, 99)}.py"
            facts.append(path)
            call = FunctionCall(f"c{t}", "read_file", {"path": path})
            add("agent", Content("model", (Part(text="Reading the file."), Part(function_call=call))))
            body = " ".join(rng.choice(words) for _ in range(300))
            add("user", Content("user", (Part(function_response=FunctionResponse(f"c{t}", "read_file", {"result": body})),)))
        elif kind == 2:
            ident = f"{rng.choice(words)}_{rng.choice(words)}_{rng.randint(1, 9)}"
            commit = f"{rng.getrandbits(40):010x}"
            facts += [ident, commit]
            add("agent", Content("model", (Part(text=f"The bug is in `{ident}`, introduced by commit {commit}. " + FILLER * 2),)))
        elif kind == 3:
            choice = f"{rng.choice(words)} {rng.choice(words)} strategy {t}"
            facts.append(f"decided to use the {choice}")
            add("agent", Content("model", (Part(text=f"After comparing options we decided to use the {choice}. " + FILLER),)))
        elif kind == 4:
            uid = str(uuid.UUID(int=rng.getrandbits(128)))
            url = f"https://docs.example.com/{rng.choice(words)}/{rng.randint(1, 999)}"
            facts += [uid, url]
            add("user", Content("user", (Part(text=f"The failing request id is {uid}, see {url} for the runbook."),)))
        else:
            path = f"/etc/{rng.choice(words)}/{rng.choice(words)}.conf"
            facts.append(path)
            call = FunctionCall(f"w{t}", "edit_file", {"path": path, "content": FILLER * 4})
            add("agent", Content("model", (Part(function_call=call),)))
            add("user", Content("user", (Part(function_response=FunctionResponse(f"w{t}", "edit_file", {"status": "ok"})),)))
    return events, facts


def recall(summary: str, facts: list[str]) -> float:
    return sum(1 for f in facts if f in summary) / len(facts)


def fact_recall() -> dict[str, Any]:
    events, facts = seeded_conversation()
    policy = resolve(CompactionPolicy())  # the defaults: keep 20,000 tokens, 1 MiB summaries
    plan = plan_compaction(history_from_events(events), policy, CompactionTrigger.MANUAL)
    assert isinstance(plan, CompactionPlan)
    summarized = {f for f in facts if any(f in str(e.content) for e in plan.source)}
    started = time.perf_counter()
    summary = summarize(plan.request.events, "", plan.request.target_summary_bytes, policy.max_summary_bytes)
    elapsed = time.perf_counter() - started
    # Chained: three compactions over growing thirds, each folding the previous summary.
    previous = ""
    chained_end = 0
    for third in (1, 2, 3):
        part = events[: len(events) * third // 3]
        chain_plan = plan_compaction(history_from_events(part), policy, CompactionTrigger.MANUAL)
        assert isinstance(chain_plan, CompactionPlan)
        new = [e for e in chain_plan.request.events if not previous or e.sequence > chained_end]
        previous = summarize(new, previous, chain_plan.request.target_summary_bytes, policy.max_summary_bytes)
        chained_end = chain_plan.end_sequence
    chained_facts = [f for f in facts if any(f in str(e.content) for e in events[:chained_end])]
    return {
        "fact_recall": round(recall(summary, sorted(summarized)), 4),
        "fact_recall_chained": round(recall(previous, chained_facts), 4),
        "facts_planted": len(facts),
        "facts_summarized": len(summarized),
        "summary_bytes": len(summary.encode()),
        "source_events": len(plan.source),
        "source_input_bytes": plan.request.input_bytes,
        "extractive_ms": round(elapsed * 1000, 2),
    }


async def main() -> dict[str, Any]:
    figures = fact_recall()
    with tempfile.TemporaryDirectory() as tmp_name:
        figures.update(await latency(pathlib.Path(tmp_name)))
    figures["bar_busy_p99_ratio_max"] = 1.2
    figures["bars_met"] = figures["busy_p99_ratio"] <= 1.2
    return figures


if __name__ == "__main__":
    result = asyncio.run(main())
    for key, value in result.items():
        print(f"{key:>30}: {value}", file=sys.stderr)
    print(json.dumps(result))
