"""Load shedding: ``--agents`` agents calling Generate as fast as they can.

Both services run as their own processes (``agentctx serve``, mTLS, SQLite,
the local simulator). Each agent has its own session and calls Generate in
a loop with a ``--deadline-s`` deadline for ``--duration-s`` seconds; on
RESOURCE_EXHAUSTED with RetryInfo it waits the delay it was given, as an
agent should. Two modes, in the same run: ``unbounded`` (admission bounds
set out of reach: what the service did before it shed load) and
``bounded`` (the default settings).

Figures per mode: p50/p99 latency of the calls that completed, how many
completed, were shed (RESOURCE_EXHAUSTED with RetryInfo), ran out of
deadline on the client (DEADLINE_EXCEEDED), or failed otherwise; and
``late_replies``: turns the service completed (their reply is stored) after
the caller had given up on them. Both modes' services run side by side and
are driven in alternating rounds (``--rounds``, AB BA ...);
``p99_ms_per_round`` and ``p99_spread`` (max over min) show how much the
tail moves between rounds, and ``bounded_over_unbounded_p99`` is the median
of the per-round ratios.

Once, at load 7-10, the bounded tail was worse than the unbounded one
(p99 996 ms against 706 ms). That was thought to come from every shed call
getting the same RetryInfo delay, so the shed agents came back together as
a new burst; the server now jitters the delay by +-50%
(agentctx_common/load_shedding.py). The inversion has not come back in 16
rounds since: bounded over unbounded p99 was 0.67-0.91 with the jitter and
0.52-0.79 without it (2026-12-04), on a quiet machine and with both cores kept busy by
other processes, so the jitter is not what prevents it and its cause was
not found. ``bounded_over_unbounded_p99_per_round`` shows every round.

Run: ``.venv/bin/python -m bench.overload`` from the repository root.
Loopback only; bounded by ``--duration-s``. The last line is one JSON object
with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.certs import init_dev_certs
from agentctx_common.status import error_from_rpc
from bench import cputime
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel
from tests.turns.builders import SYSTEM, TOOLS, create_session, user_text

UNBOUNDED = {"max_inflight_rpcs": 1_000_000, "max_inflight_request_bytes": 1 << 40, "min_deadline_remaining_s": 0}


def _pct(samples: list[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


async def _agent(stub: Any, session: str, index: int, until: float, deadline_s: float,
                 tally: collections.Counter[str], latencies: list[float], gave_up: list[tuple[str, str]]) -> None:
    turn = 0
    while time.monotonic() < until:
        turn += 1
        reply_id = f"r-{index}-{turn}"
        request = pb.GenerateRequest(
            session=session, input=[user_text(f"u-{index}-{turn}", f"Turn {turn}: and then?")],
            reply_event_id=reply_id, system_instruction=SYSTEM, tools=TOOLS,
        )
        started = time.monotonic()
        try:
            await stub.Generate(request, timeout=deadline_s)
            latencies.append(time.monotonic() - started)
            tally["OK"] += 1
        except grpc.aio.AioRpcError as exc:
            err = error_from_rpc(exc)
            if exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and err.retry_after is not None:
                tally["shed"] += 1
                await asyncio.sleep(err.retry_after)
            elif exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                tally[f"DEADLINE_EXCEEDED/{err.wire_reason}"] += 1
                gave_up.append((session, reply_id))
            else:
                tally[f"{exc.code().name}/{err.wire_reason}"] += 1


async def _late_replies(stub: Any, gave_up: list[tuple[str, str]]) -> int:
    """Replies stored for turns whose caller saw DEADLINE_EXCEEDED."""
    wanted: dict[str, set[str]] = collections.defaultdict(set)
    for session, reply_id in gave_up:
        wanted[session].add(reply_id)
    late = 0
    for session, ids in wanted.items():
        token = ""
        while True:
            page = await stub.ListEvents(pb.ListEventsRequest(parent=session, page_size=1000, page_token=token),
                                         timeout=60)
            late += sum(1 for e in page.events if e.id in ids)
            token = page.next_page_token
            if not token:
                break
    return late


async def _drive(port: int, certs: pathlib.Path, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    async with secure_channel(port, certs) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        sessions = [(await create_session(stub, user=f"{tag}-{i}")).name for i in range(args.agents)]
        tally: collections.Counter[str] = collections.Counter()
        latencies: list[float] = []
        gave_up: list[tuple[str, str]] = []
        until = time.monotonic() + args.duration_s
        await asyncio.gather(*(
            _agent(stub, s, i, until, args.deadline_s, tally, latencies, gave_up) for i, s in enumerate(sessions)
        ))
        await asyncio.sleep(2.0)  # let turns the callers gave up on finish, if they still run
        late = await _late_replies(stub, gave_up)
    return {"tally": tally, "latencies": latencies, "late_replies": late}


def _figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's figures over its rounds: latencies pooled, counts summed,
    and each round's p99 with their spread (max over min)."""
    tally: collections.Counter[str] = collections.Counter()
    latencies: list[float] = []
    for r in rounds:
        tally.update(r["tally"])
        latencies += r["latencies"]
    p99s = [_pct(r["latencies"], 0.99) for r in rounds]
    return {
        "completed": tally.pop("OK", 0), "shed": tally.pop("shed", 0),
        "client_deadline_exceeded": sum(v for k, v in tally.items() if k.startswith("DEADLINE_EXCEEDED")),
        "other_codes": {k: v for k, v in tally.items() if not k.startswith("DEADLINE_EXCEEDED")},
        "late_replies": sum(r["late_replies"] for r in rounds),
        "p50_ms": _pct(latencies, 0.5), "p99_ms": _pct(latencies, 0.99),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else 0.0,
        "p99_ms_per_round": p99s, "p99_ms_median_of_rounds": statistics.median(p99s) if p99s else 0.0,
        "p99_spread": cputime.spread(p99s),
    }


def _start(root: pathlib.Path, certs: pathlib.Path, tag: str, bounds: dict[str, Any]) -> tuple[list[Any], int]:
    """Both services of one mode, healthy: their processes (context first)
    and the context service's port."""
    context_port, cache_port = free_port(), free_port()
    tmp = root / tag
    tmp.mkdir()
    config = write_config(
        tmp / "agentctx.toml", certs, context_port=context_port, cache_port=cache_port, data_dir=tmp / "data",
        context={"log_level": "WARNING", **bounds},
        cache={"log_level": "WARNING", "local_min_cache_tokens": 64, "min_prefix_tokens": 64, **bounds},
    )
    procs = [spawn("cache", config, tmp / "cache.log")]
    try:
        wait_healthy(cache_port, certs, "context-client", procs[0], timeout=120)
        procs.insert(0, spawn("context", config, tmp / "context.log"))
        wait_healthy(context_port, certs, "agent-client", procs[0], timeout=120)
    except BaseException:
        for proc in procs:
            stop(proc)
        raise
    return procs, context_port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--duration-s", type=float, default=20.0, help="per mode and round")
    parser.add_argument("--deadline-s", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode, alternating AB BA ...")
    args = parser.parse_args()
    figures: dict[str, Any] = {"agents": args.agents, "duration_s": args.duration_s, "deadline_s": args.deadline_s,
                               "rounds": args.rounds}
    modes = {"unbounded": UNBOUNDED, "bounded": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        certs = root / "certs"
        certs.mkdir()
        init_dev_certs(certs)
        started: dict[str, tuple[list[Any], int]] = {}
        rounds: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
        try:
            for mode, bounds in modes.items():
                started[mode] = _start(root, certs, mode, bounds)
            for r in range(args.rounds):
                # AB BA ...: the machine's other load falls on both modes alike.
                for mode in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
                    rounds[mode].append(asyncio.run(_drive(started[mode][1], certs, args, f"{mode}-{r}")))
        finally:
            for procs, _ in started.values():
                for proc in procs:
                    stop(proc)
        for mode, bounds in modes.items():
            figures[mode] = {"settings": bounds or "defaults", **_figures(rounds[mode])}
    per_round = [round(b / u, 3) if u else 0.0 for b, u in
                 zip(figures["bounded"]["p99_ms_per_round"], figures["unbounded"]["p99_ms_per_round"], strict=True)]
    figures["bounded_over_unbounded_p99_per_round"] = per_round
    figures["bounded_over_unbounded_p99"] = round(statistics.median(per_round), 3) if per_round else 0.0
    figures["bounded_over_unbounded_p99_spread"] = cputime.spread(per_round)
    for mode in modes:
        for key, value in figures[mode].items():
            print(f"{mode:>9} {key:>24}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
