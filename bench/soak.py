"""Flat over long runs: per-turn cost and memory of both services across
many Generate turns with compaction holding every request near 16k tokens.

Both services run as their own processes (``agentctx serve``, mTLS, SQLite,
the local simulator with prefix caching on, the deployment shape).
``--agents`` agents (16), each on its own session, run ``--turns`` Generate
turns (500) at the same time; each input is ~1.2 KB of text, and the
session's compaction policy (context window 16,384 tokens, 2,048 reserved,
6,000 kept verbatim, extractive) compacts whenever a request would pass
~14k tokens, so every session saws between ~6k and ~14k tokens for the
whole run.

Figures, after a warm-up of ``--warmup`` turns per agent (25):
``p50_ratio_last_first``: the p50 Generate latency over the last block of
25 turns (of every agent) over the first block after the warm-up (aim:
at most 1.1); ``rss_growth_mib_per_1k_turns`` for each service: the least
squares slope of its RSS (sampled every 0.5 s) against the turns completed
by all agents, after the warm-up (aim: near 0); the SQLite file and WAL
sizes at the end; compactions seen; the request tokens' range after the
warm-up (prompt tokens as the simulator counted them); ``live_caches_end``:
the caches the cache service still holds for the agents' scopes when the
run ends (GetContextLifecycle of every session), and per agent
(``live_caches_per_agent_end``): caches that compaction superseded and
that nobody reads any more should not be among them.

Run: ``.venv/bin/python -m bench.soak`` from the repository root
(``--turns 100`` for a short run). Bounded: every call has a deadline and
the run stops at ``--max-s`` seconds (1,800) with what it has. The last
line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2
from agentctx_common.certs import init_dev_certs
from agentctx_common.tls import channel_credentials
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.turns.builders import SYSTEM, TOOLS, create_session, user_text

BLOCK = 25
AIM_P50_RATIO = 1.1
CALL_TIMEOUT_S = 60.0
TEXT = (
    "I am planning the next leg of the trip and would like your view on the options: the coastal road, the "
    "mountain pass or the train through the valley. Weigh time, cost, scenery and the weather this week. "
) * 6  # ~1.2 KB
COMPACTION = policy_pb2.CompactionPolicy(
    enabled=True, context_window=16_384, reserve_tokens=2_048, keep_recent_tokens=6_000,
)


def _rss_kb(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    """(turns done, RSS KiB of each process) every ``every_s`` seconds."""

    def __init__(self, pids: dict[str, int], progress: list[int], every_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pids, self.progress, self.every_s = pids, progress, every_s
        self.samples: list[tuple[int, dict[str, int]]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            self.samples.append((self.progress[0], {name: _rss_kb(pid) for name, pid in self.pids.items()}))

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _slope(points: list[tuple[float, float]]) -> float:
    """Least squares slope of y over x (0 when x does not vary)."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


async def _agent(stub: Any, index: int, turns: int, deadline: float, progress: list[int],
                 latencies: list[list[float]], prompts: list[list[int]], compactions: list[int]) -> str:
    session = await create_session(stub, user=f"agent-{index}", compaction=COMPACTION)
    for turn in range(turns):
        if time.monotonic() > deadline:
            return session.name
        request = pb.GenerateRequest(
            session=session.name, input=[user_text(f"a{index}-t{turn}", f"Turn {turn}. {TEXT}")],
            system_instruction=SYSTEM, tools=TOOLS,
        )
        started = time.perf_counter()
        response = await stub.Generate(request, timeout=CALL_TIMEOUT_S)
        latencies[turn].append(time.perf_counter() - started)
        prompts[turn].append(response.reply.usage.prompt_tokens)
        compactions[0] += len(response.compactions)
        progress[0] += 1
    return session.name


async def _load(port: int, certs: pathlib.Path, args: argparse.Namespace, progress: list[int]) -> dict[str, Any]:
    creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
    latencies: list[list[float]] = [[] for _ in range(args.turns)]
    prompts: list[list[int]] = [[] for _ in range(args.turns)]
    compactions = [0]
    deadline = time.monotonic() + args.max_s
    async with grpc.aio.secure_channel(
        f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "localhost")]
    ) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        sessions = await asyncio.gather(*(
            _agent(stub, i, args.turns, deadline, progress, latencies, prompts, compactions)
            for i in range(args.agents)
        ))
        # Each agent is its own user, so its own cache scope.
        views = [await stub.GetContextLifecycle(pb.GetContextLifecycleRequest(session=s), timeout=CALL_TIMEOUT_S)
                 for s in sessions]
    return {"latencies": latencies, "prompts": prompts, "compactions": compactions[0],
            "live_caches": sum(v.cache_entry_count for v in views)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentctx-soak-") as tmp:
        root = pathlib.Path(tmp)
        certs = root / "certs"
        certs.mkdir()
        init_dev_certs(certs)
        context_port, cache_port = free_port(), free_port()
        data = root / "data"
        config = write_config(
            root / "agentctx.toml", certs, context_port=context_port, cache_port=cache_port, data_dir=data,
            context={"log_level": "WARNING"},
            cache={"log_level": "WARNING", "local_min_cache_tokens": 64, "min_prefix_tokens": 64},
        )
        cache = spawn("cache", config, root / "cache.log")
        context = spawn("context", config, root / "context.log")
        progress = [0]
        try:
            wait_healthy(cache_port, certs, "context-client", cache)
            wait_healthy(context_port, certs, "agent-client", context)
            sampler = Sampler({"context": context.pid, "cache": cache.pid}, progress)
            sampler.start()
            started = time.monotonic()
            try:
                outcome = asyncio.run(_load(context_port, certs, args, progress))
            finally:
                sampler.stop()
            elapsed = time.monotonic() - started
            files = {p.name: p.stat().st_size for p in data.glob("*.db*")}
        finally:
            stop(context)
            stop(cache)

    latencies, prompts = outcome["latencies"], outcome["prompts"]
    done = [i for i, samples in enumerate(latencies) if len(samples) == args.agents]
    completed = len(done)
    first_block = range(args.warmup, args.warmup + BLOCK)
    last_block = range(completed - BLOCK, completed)
    figures: dict[str, Any] = {
        "agents": args.agents, "turns": args.turns, "turns_completed_per_agent": completed,
        "warmup_turns": args.warmup, "block_turns": BLOCK, "elapsed_s": round(elapsed, 1),
        "turns_per_s": round(progress[0] / elapsed, 1), "compactions": outcome["compactions"],
        "live_caches_end": outcome["live_caches"],
        "live_caches_per_agent_end": round(outcome["live_caches"] / args.agents, 2),
    }
    if completed >= args.warmup + 2 * BLOCK:
        first = statistics.median(x for t in first_block for x in latencies[t])
        last = statistics.median(x for t in last_block for x in latencies[t])
        figures["p50_ms_first_block"] = round(first * 1e3, 3)
        figures["p50_ms_last_block"] = round(last * 1e3, 3)
        figures["p50_ratio_last_first"] = round(last / first, 3)
        figures["aim_p50_ratio_last_first"] = AIM_P50_RATIO
        after = [p for t in range(args.warmup, completed) for p in prompts[t]]
        figures["prompt_tokens_after_warmup_min_p50_max"] = [min(after), int(statistics.median(after)), max(after)]
    warm_turns = args.warmup * args.agents
    for name in ("context", "cache"):
        points = [(turns, rss[name] / 1024) for turns, rss in sampler.samples if turns >= warm_turns and rss[name]]
        figures[f"rss_growth_mib_per_1k_turns_{name}"] = round(_slope(points) * 1000, 3)
        if points:
            figures[f"rss_mib_{name}_after_warmup"] = round(points[0][1], 1)
            figures[f"rss_mib_{name}_end"] = round(points[-1][1], 1)
    figures["sqlite_file_mib"] = {k: round(v / 2**20, 2) for k, v in sorted(files.items())}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--turns", type=int, default=500, help="Generate turns per agent")
    parser.add_argument("--warmup", type=int, default=BLOCK, help="turns per agent before the first block")
    parser.add_argument("--max-s", type=float, default=1800.0, help="stop after this many seconds")
    args = parser.parse_args()
    figures = run(args)
    for key, value in figures.items():
        print(f"{key:>40}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
