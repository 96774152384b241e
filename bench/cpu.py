"""CPU milliseconds per request: what one call costs the services in user
+ system time, which the machine's other load changes far less than wall
time, so the cost of a turn is known per core however busy the machine.

Both services run as their own processes (``agentctx serve``, mTLS,
SQLite, the local simulator, an instant model); their CPU is read from
/proc (bench/cputime.py) before and after a block of calls, driven one at a
time from this process, whose own CPU (the client's) is reported apart.
Per kind of call, ``<kind>_cpu_ms`` (both services' CPU per call),
``<kind>_client_cpu_ms``, ``<kind>_wall_ms`` and ``<kind>_over_empty``
(its CPU over the empty RPC's):

- ``empty``: health Check on the context service (an empty unary RPC);
  ``empty_cache``: the same on the cache service.
- ``append``: AppendEvent of a short user message.
- ``build_100``, ``build_1k``: BuildContext on sessions of 100 and 1,000
  events (bench.build_context's realistic mix, tool results of ~3 KB).
- ``generate_cached``: a short Generate turn with caching on (the lease
  hits or grows the cached prefix; the input and the reply are stored);
  ``generate_cached_share``: the cached share of those turns' prompts.
- ``generate_1k``: the same turn on a session that held 1,000 events
  (bench.build_context's mix) before its first turn (each turn adds two).
- ``lease_hit``: AcquireLease that hits, with its ReleaseLease, straight
  on the cache service (two RPCs; compare with twice ``empty_cache``).

Blocks alternate over ``--rounds`` rounds; medians are reported with each
figure's spread (max over min across rounds).

Run: ``.venv/bin/python -m bench.cpu`` from the repository root
(``--calls N --rounds N``). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.certs import init_dev_certs
from bench import cputime
from bench.build_context import session_events
from context_service.mapping.convert import event_to_proto
from tests.cache import protos
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel
from tests.turns.builders import SYSTEM, TOOLS, create_session, user_text

Call = Callable[[int], Awaitable[Any]]


async def _session_of(stub: Any, user: str, events: int, *, cache: bool = False) -> str:
    name = (await create_session(stub, user=user, cache=cache)).name
    for event in session_events(events):
        await stub.AppendEvent(pb.AppendEventRequest(parent=name, event=event_to_proto(event, None)))
    return name


def _build(session: str) -> pb.BuildContextRequest:
    return pb.BuildContextRequest(session=session, input=[user_text("q", "And what should I do next?").content],
                                  system_instruction=SYSTEM, tools=TOOLS)


async def _calls(stub: Any, cache: Any, health: Any, cache_health: Any,
                 tokens: dict[str, int]) -> dict[str, Call]:
    """Each kind of call, ready: ``call(i)`` makes the i-th one. ``tokens``
    sums the Generate turns' prompt and cached prompt tokens."""
    ping = health_pb2.HealthCheckRequest()
    appends = (await create_session(stub, user="append", cache=False)).name
    builds = {n: _build(await _session_of(stub, f"build-{n}", n)) for n in (100, 1_000)}
    turns = (await create_session(stub, user="turns", cache=True)).name
    long_turns = await _session_of(stub, "turns-1k", 1_000, cache=True)
    lease = protos.acquire(6, user="hit")
    first = await cache.AcquireLease(lease)
    await cache.ReleaseLease(cpb.ReleaseLeaseRequest(lease=first.lease))
    counter = iter(range(1 << 30))

    async def append(i: int) -> None:
        await stub.AppendEvent(pb.AppendEventRequest(parent=appends, event=user_text(f"a-{next(counter)}", "Hi.")))

    async def turn(session: str, count: bool) -> None:
        n = next(counter)
        reply = await stub.Generate(pb.GenerateRequest(
            session=session, input=[user_text(f"g-{n}", f"Turn {n}: and then?")], system_instruction=SYSTEM,
            tools=TOOLS), timeout=60)
        if count:
            tokens["prompt"] += reply.reply.usage.prompt_tokens
            tokens["cached"] += reply.reply.usage.cached_prompt_tokens

    async def lease_hit(i: int) -> None:
        reply = await cache.AcquireLease(lease)
        await cache.ReleaseLease(cpb.ReleaseLeaseRequest(lease=reply.lease))

    return {
        "empty": lambda i: health.Check(ping),
        "empty_cache": lambda i: cache_health.Check(ping),
        "append": append,
        "build_100": lambda i: stub.BuildContext(builds[100]),
        "build_1k": lambda i: stub.BuildContext(builds[1_000]),
        "generate_cached": lambda i: turn(turns, True),
        "generate_1k": lambda i: turn(long_turns, False),
        "lease_hit": lease_hit,
    }


async def _drive(context_port: int, cache_port: int, certs: pathlib.Path, pids: list[int],
                 calls: int, rounds: int, tokens: dict[str, int]) -> dict[str, list[dict[str, float]]]:
    async with secure_channel(context_port, certs) as channel, \
            secure_channel(cache_port, certs, client="context-client") as cache_channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        cache = cache_service_pb2_grpc.CacheServiceStub(cache_channel)
        kinds = await _calls(stub, cache, health_pb2_grpc.HealthStub(channel), health_pb2_grpc.HealthStub(cache_channel),
                             tokens)
        for call in kinds.values():  # warm-up: channels, caches, the cached prefix
            for i in range(5):
                await call(i)
        out: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
        for r in range(rounds):
            for kind in (list(kinds) if r % 2 == 0 else list(kinds)[::-1]):
                meter = cputime.Meter(pids).start()
                for i in range(calls):
                    await kinds[kind](i)
                out[kind].append(meter.stop().per_call_ms(calls))
    return out


def run(calls: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        context_port, cache_port = free_port(), free_port()
        config = write_config(tmp / "agentctx.toml", certs, context_port=context_port, cache_port=cache_port,
                              data_dir=tmp / "data", context={"log_level": "WARNING"},
                              cache={"log_level": "WARNING", "local_min_cache_tokens": 64, "min_prefix_tokens": 64,
                                     # generate_1k's whole history in one call
                                     "local_context_window": 10_000_000})
        procs = [spawn("cache", config, tmp / "cache.log")]
        try:
            wait_healthy(cache_port, certs, "context-client", procs[0], timeout=120)
            procs.append(spawn("context", config, tmp / "context.log"))
            wait_healthy(context_port, certs, "agent-client", procs[1], timeout=120)
            tokens = {"prompt": 0, "cached": 0}
            samples = asyncio.run(_drive(context_port, cache_port, certs, [p.pid for p in procs], calls, rounds,
                                         tokens))
        finally:
            for proc in reversed(procs):
                stop(proc)
    figures: dict[str, Any] = {"calls_per_block": calls, "rounds": rounds,
                               "generate_cached_share": round(tokens["cached"] / max(tokens["prompt"], 1), 3)}
    for kind, blocks in samples.items():
        cpu = [b["servers_cpu_ms"] for b in blocks]
        figures[f"{kind}_cpu_ms"] = round(statistics.median(cpu), 4)
        figures[f"{kind}_cpu_spread"] = cputime.spread(cpu)
        figures[f"{kind}_client_cpu_ms"] = round(statistics.median(b["driver_cpu_ms"] for b in blocks), 4)
        figures[f"{kind}_wall_ms"] = round(statistics.median(b["wall_ms"] for b in blocks), 4)
    for kind in samples:
        figures[f"{kind}_over_empty"] = round(figures[f"{kind}_cpu_ms"] / figures["empty_cpu_ms"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures = run(args.calls, args.rounds)
    for key, value in figures.items():
        print(f"{key:>28}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
