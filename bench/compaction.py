"""Compaction: BuildContext latency on a busy session while background
compaction runs, against the same workload without compaction, in one run;
and the extractive compactor's fact recall.

Latency. The context service runs as its own process (``agentctx serve
context``, mTLS, SQLite, its compaction worker on). For each phase a fresh
session is filled with the same history; then an agent loop appends a turn
every few milliseconds and, like the Generate flow, asks for compaction at
each turn boundary (from this process: another replica sharing the
database), while BuildContext is timed on the same session. In the
"compaction" phase the session's policy enables background compaction, so
durable jobs keep summarizing it in the server's worker; in the "baseline"
phase compaction is disabled and nothing else changes. BuildContext uses a
fixed history budget (TRUNCATE), so both phases return contexts of the same
size and the ratio shows the cost of compaction running beside the call.
A neighbour session that is never compacted is timed too, as a second view
of interference. Phases alternate in rounds so drift hits both alike.

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
from typing import Any

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.certs import init_dev_certs
from context_service.compaction.remote import RemoteCompactor
from context_service.compaction.service import CompactionService, Compactors
from context_service.domain.compaction.extractive import summarize
from context_service.domain.compaction.history import history_from_events
from context_service.domain.compaction.plan import CompactionPlan, plan_compaction
from context_service.domain.compaction.policy import resolve
from context_service.domain.config import CompactionPolicy
from context_service.domain.model import CompactionTrigger, Content, Event, FunctionCall, FunctionResponse, Part, SessionKey
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


def agent_process(port: int, certs: str, data_dir: str, commands: Any, replies: Any, running: Any) -> None:
    """The agent, in its own process so that its work never shares the
    measuring loop: for each session it is given, it appends turns and asks
    for compaction at each turn boundary (as the Generate flow does, from
    another replica) until told to stop."""
    asyncio.run(_agent(port, pathlib.Path(certs), pathlib.Path(data_dir), commands, replies, running))


async def _agent(port: int, certs: pathlib.Path, data: pathlib.Path, commands: Any, replies: Any, running: Any) -> None:
    settings = ContextSettings(dev_plaintext=True, data_dir=data, compaction_worker=False)
    store = await open_store(settings.resolved_database_url)
    remote = RemoteCompactor(settings)
    service = CompactionService(store, SqlCompactionStore(store), Compactors(remote=remote), jobs=SqlJobStore(store))
    channel = secure_channel(port, certs)
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    loop = asyncio.get_running_loop()
    try:
        while True:
            command = await loop.run_in_executor(None, commands.get)
            if command is None:
                return
            name, n = command
            key = SessionKey(APP, USER, name.rsplit("/", 1)[1])
            turns = 0
            while running.is_set():
                await append_turn(stub, name, n + turns)
                await service.maybe_compact_at_turn_boundary(key)  # background: enqueues a durable job
                turns += 1
                await asyncio.sleep(TURN_INTERVAL_S)
            replies.put(turns)
    finally:
        await channel.close()
        await remote.close()
        await store.close()


async def one_round(stub: Any, agent: tuple[Any, Any, Any], policy: policy_pb2.CompactionPolicy,
                    busy: list[float], neighbour: list[float], neighbour_name: str) -> int:
    commands, replies, running = agent
    session_id = uuid.uuid4().hex[:12]
    name = f"apps/{APP}/users/{USER}/sessions/{session_id}"
    session = session_pb2.Session()
    session.config.compaction.CopyFrom(policy)
    await stub.CreateSession(pb.CreateSessionRequest(parent=f"apps/{APP}/users/{USER}", session_id=session_id, session=session))
    for n in range(PREFILL_TURNS):
        await append_turn(stub, name, n)
    budget = policy_pb2.SelectionPolicy(max_tokens=BUILD_BUDGET_TOKENS, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE)
    build = pb.BuildContextRequest(session=name, input=[text("user", "what next?")], policy=budget)
    build_neighbour = pb.BuildContextRequest(session=neighbour_name, input=[text("user", "what next?")], policy=budget)
    for _ in range(5):  # warm the server's history cache for both sessions
        await stub.BuildContext(build)
        await stub.BuildContext(build_neighbour)
    running.set()
    commands.put((name, PREFILL_TURNS))
    try:
        for i in range(BUILDS_PER_ROUND):
            target, into = (build, busy) if i % 2 == 0 else (build_neighbour, neighbour)
            started = time.perf_counter()
            await stub.BuildContext(target)
            into.append((time.perf_counter() - started) * 1e6)
    finally:
        running.clear()
        await asyncio.get_running_loop().run_in_executor(None, replies.get)
    count = 0
    token = ""
    while True:
        listed = await stub.ListEvents(pb.ListEventsRequest(
            parent=name, include_compactions=True, page_size=1000, page_token=token
        ))
        count += sum(e.kind == event_pb2.EVENT_KIND_COMPACTION for e in listed.events)
        token = listed.next_page_token
        if not token:
            return count


async def latency(tmp: pathlib.Path) -> dict[str, Any]:
    certs = tmp / "certs"
    init_dev_certs(certs)
    data = tmp / "data"
    port = free_port()
    config = write_config(
        tmp / "config.toml", certs, context_port=port, cache_port=free_port(), data_dir=data,
        context={"log_level": "WARNING", "compaction_job_poll_s": 0.05, "require_client_cert": True},
    )
    proc = spawn("context", config, tmp / "context.log")
    ctx = multiprocessing.get_context("spawn")
    commands, replies, running = ctx.Queue(), ctx.Queue(), ctx.Event()
    agent = ctx.Process(target=agent_process, args=(port, str(certs), str(data), commands, replies, running))
    try:
        wait_healthy(port, certs, "agent-client", proc)
        agent.start()
        channel = secure_channel(port, certs)
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        neighbour = f"apps/{APP}/users/{USER}/sessions/neighbour"
        await stub.CreateSession(pb.CreateSessionRequest(parent=f"apps/{APP}/users/{USER}", session_id="neighbour"))
        for n in range(PREFILL_TURNS):
            await append_turn(stub, neighbour, n)
        # Per round, per phase: the busy session's and the neighbour's samples.
        rounds: list[dict[str, tuple[list[float], list[float]]]] = []
        compactions = 0
        try:
            for _ in range(ROUNDS):
                pair: dict[str, tuple[list[float], list[float]]] = {}
                for phase, policy in (("baseline", BASELINE), ("compaction", COMPACTING)):
                    busy: list[float] = []
                    near: list[float] = []
                    made = await one_round(stub, (commands, replies, running), policy, busy, near, neighbour)
                    pair[phase] = (busy, near)
                    if phase == "compaction":
                        compactions += made
                    else:
                        assert made == 0, "the baseline phase must not compact"
                rounds.append(pair)
        finally:
            await channel.close()
    finally:
        if agent.pid is not None:
            commands.put(None)
            agent.join(30)
            if agent.is_alive():
                agent.kill()
        stop(proc)
    return latency_figures(rounds, compactions)


def latency_figures(rounds: list[dict[str, tuple[list[float], list[float]]]], compactions: int) -> dict[str, Any]:
    """Pooled quantiles per phase, and the p99 ratios as the median over
    rounds of each round's ratio: a round's two phases run back to back, so
    a burst of load from elsewhere on the machine skews one round, not the
    figure."""
    figures: dict[str, Any] = {}
    for which, index in (("", 0), ("neighbour_", 1)):
        for phase in ("baseline", "compaction"):
            pooled = [x for r in rounds for x in r[phase][index]]
            p50, p99 = quantiles(pooled)
            figures[f"{which}{phase}_p50_us"], figures[f"{which}{phase}_p99_us"] = round(p50, 1), round(p99, 1)
        per_round = [quantiles(r["compaction"][index])[1] / quantiles(r["baseline"][index])[1] for r in rounds]
        name = "busy" if not which else "neighbour"
        figures[f"{name}_p99_ratio"] = round(statistics.median(per_round), 3)
        figures[f"{name}_p99_ratio_pooled"] = round(figures[f"{which}compaction_p99_us"] / figures[f"{which}baseline_p99_us"], 3)
    figures["busy_p50_ratio"] = round(figures["compaction_p50_us"] / figures["baseline_p50_us"], 3)
    figures["background_compactions"] = compactions
    figures["rounds"] = len(rounds)
    figures["builds_per_phase"] = sum(len(r["baseline"][0]) + len(r["baseline"][1]) for r in rounds)
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
