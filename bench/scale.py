"""How AppendEvent and BuildContext cost grows with a session's history.

Sessions of 100, 1,000, 10,000 and 100,000 events (``--sizes``; the mix of
``bench.build_context``: question, tool call, tool result, answer with
usage) are written straight through the store in bulk (``append_events``
in chunks), then served by an in-process context service over mTLS on
SQLite. Two kinds of build, each through gRPC:

- *bounded*: a per-call policy with a token budget and TRUNCATE (a few
  hundred events selected whatever the history's length);
- *full*: the session's default policy (every event sent).

Per size and kind: *cold* (the first build after the server started: a new
replica, or a session out of its cache; ``--cold-rounds`` restarts), *warm*
(the same request again on an unchanged session) and *after append* (one
AppendEvent through gRPC, then the build; the append's own time is the
``append`` figure). The append figures are taken on a server serving bounded builds only
(``full_append_*``: beside full builds, whose histories the server holds).
Figures are p50 milliseconds; ratios in the same run:
``bounded_growth_1k_to_100k_{cold,warm,after_append,append}`` (the 100k
figure over the 1k one; aim: builds at most 2, append at most 1.5) and the
same for full builds. With ``--sizes`` leaving out 1k or 100k the growth
is taken between the smallest and the largest size.

Run: ``.venv/bin/python -m bench.scale`` from the repository root (the
100k history takes a few minutes to write). The last line is one JSON
object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2
from agentctx_common.tls import channel_credentials
from bench.build_context import APP, bench_settings, request, session_events
from context_service.domain.config import ContextConfig
from context_service.domain.model import SessionKey
from context_service.mapping.convert import event_to_proto
from context_service.storage.sql_store import open_store
from tests.support.servers import start_context

SIZES = (100, 1_000, 10_000, 100_000)
# A budget that selects a few hundred events of this mix.
BOUNDED_TOKENS = 30_000
AIM_BUILD_GROWTH = 2.0
AIM_APPEND_GROWTH = 1.5
CHUNK = 1_000
# Extra events kept for the after-append rounds.
SPARE = 800
MAX_MESSAGE = 512 * 1024 * 1024


def label(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 else str(n)


def build_request(n: int, bounded: bool) -> pb.BuildContextRequest:
    req = request(n)
    req.session = f"apps/{APP}/users/u/sessions/s{n}"
    if bounded:
        req.policy.CopyFrom(policy_pb2.SelectionPolicy(max_tokens=BOUNDED_TOKENS, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE))
    return req


async def populate(db_url: str, sizes: tuple[int, ...]) -> float:
    """Writes every session through the store in chunks; seconds taken."""
    started = time.perf_counter()
    store = await open_store(db_url, create_if_empty=True)
    try:
        for n in sizes:
            key = SessionKey(APP, "u", f"s{n}")
            await store.create_session(key, state={}, config=ContextConfig())
            events = session_events(n)
            for at in range(0, n, CHUNK):
                await store.append_events(key, events[at:at + CHUNK])
    finally:
        await store.close()
    return time.perf_counter() - started


def channel_to(port: int, certs: pathlib.Path) -> grpc.aio.Channel:
    creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=[
        ("grpc.ssl_target_name_override", "localhost"), ("grpc.max_receive_message_length", MAX_MESSAGE),
    ])


async def timed(call: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    reply = await call
    return time.perf_counter() - start, reply


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e3, 3)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    sizes = tuple(sorted(args.sizes))
    figures: dict[str, Any] = {"sizes": list(sizes), "bounded_max_tokens": BOUNDED_TOKENS}
    with tempfile.TemporaryDirectory() as tmp_name:
        certs, settings = bench_settings(pathlib.Path(tmp_name))
        # A full build of 100k events is about 150 MB.
        settings = settings.model_copy(update={"max_message_bytes": MAX_MESSAGE})
        figures["populate_s"] = round(await populate(settings.resolved_database_url, sizes), 1)
        cold: dict[tuple[int, bool], list[float]] = {(n, b): [] for n in sizes for b in (True, False)}
        selected: dict[tuple[int, bool], int] = {}
        # Cold: a fresh server per round and kind (the two kinds may share a cache).
        for _ in range(args.cold_rounds):
            for bounded in (True, False):
                server = await start_context(settings)
                channel = channel_to(server.port, certs)
                try:
                    stub = context_service_pb2_grpc.ContextServiceStub(channel)
                    for n in sizes:
                        seconds, reply = await timed(stub.BuildContext(build_request(n, bounded)))
                        cold[(n, bounded)].append(seconds)
                        selected[(n, bounded)] = reply.accounting.events_selected
                finally:
                    await channel.close()
                    await server.stop(None)
        warm: dict[tuple[int, bool], list[float]] = {k: [] for k in cold}
        after: dict[tuple[int, bool], list[float]] = {k: [] for k in cold}
        append: dict[tuple[int, bool], list[float]] = {k: [] for k in cold}
        # Warm and after append: one server per kind, bounded first, so the
        # bounded figures are not taken beside full histories held in memory.
        for bounded in (True, False):
            server = await start_context(settings)
            channel = channel_to(server.port, certs)
            try:
                stub = context_service_pb2_grpc.ContextServiceStub(channel)
                for n in sizes:
                    fresh = iter(session_events(n + SPARE)[n + (0 if bounded else SPARE // 2):])
                    req = build_request(n, bounded)
                    large = not bounded and n >= 10_000
                    for _ in range(2):
                        await stub.BuildContext(req)
                    for _ in range(args.samples // (20 if large else 1)):
                        seconds, _ = await timed(stub.BuildContext(req))
                        warm[(n, bounded)].append(seconds)
                    for _ in range(max(3, args.append_rounds // (20 if large else 1))):
                        event = event_to_proto(next(fresh), None)
                        seconds, _ = await timed(stub.AppendEvent(pb.AppendEventRequest(parent=req.session, event=event)))
                        append[(n, bounded)].append(seconds)
                        seconds, _ = await timed(stub.BuildContext(req))
                        after[(n, bounded)].append(seconds)
            finally:
                await channel.close()
                await server.stop(None)

    for (n, bounded), samples in cold.items():
        kind = "bounded" if bounded else "full"
        figures[f"{kind}_cold_p50_ms_{label(n)}"] = p50_ms(samples)
        figures[f"{kind}_warm_p50_ms_{label(n)}"] = p50_ms(warm[(n, bounded)])
        figures[f"{kind}_after_append_p50_ms_{label(n)}"] = p50_ms(after[(n, bounded)])
        figures[f"{kind}_events_selected_{label(n)}"] = selected[(n, bounded)]
        # Appends beside bounded builds (``append``) and beside full ones.
        figures[f"{'' if bounded else 'full_'}append_p50_ms_{label(n)}"] = p50_ms(append[(n, bounded)])
    low = 1_000 if 1_000 in sizes else sizes[0]
    high = 100_000 if 100_000 in sizes else sizes[-1]
    span = f"{label(low)}_to_{label(high)}"
    for kind in ("bounded", "full"):
        for what in ("cold", "warm", "after_append"):
            figures[f"{kind}_growth_{span}_{what}"] = round(
                figures[f"{kind}_{what}_p50_ms_{label(high)}"] / figures[f"{kind}_{what}_p50_ms_{label(low)}"], 3
            )
    figures[f"bounded_growth_{span}_append"] = round(
        figures[f"append_p50_ms_{label(high)}"] / figures[f"append_p50_ms_{label(low)}"], 3
    )
    figures["aim_build_growth_max"] = AIM_BUILD_GROWTH
    figures["aim_append_growth_max"] = AIM_APPEND_GROWTH
    figures["aims_met"] = all(
        figures[f"bounded_growth_{span}_{what}"] <= AIM_BUILD_GROWTH for what in ("cold", "warm", "after_append")
    ) and figures[f"bounded_growth_{span}_append"] <= AIM_APPEND_GROWTH
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200, help="warm builds per size and kind")
    parser.add_argument("--append-rounds", type=int, default=100, help="append-then-build rounds per size and kind")
    result = asyncio.run(main(parser.parse_args()))
    for key, value in result.items():
        print(f"{key:>40}: {value}", file=sys.stderr)
    print(json.dumps(result))
