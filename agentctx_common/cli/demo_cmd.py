"""``agentctx demo``: a scripted, tool-using agent conversation against the
service pair, shown call by call (prompt tokens, cached tokens, cache
state, compactions, simulated cost) and ending with a summary table.

It uses the pair at ``--target`` if one answers there; otherwise it starts
one from ``--home`` (as ``agentctx up`` does), runs, and stops it again.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import subprocess
import sys
from typing import TextIO

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.cli.connect import open_channel, rpc_failure
from agentctx_common.demo.display import Screen
from agentctx_common.demo.runner import APP, USER, DemoResult, run_demo
from agentctx_common.errors import AgentCtxError

# A 30-call demo takes about a second; on a terminal it is paced so that a
# person can watch the cache warm up (about 5 s in all).
TTY_PACE_S = 0.15


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run a scripted agent conversation and show what the cache and compaction do")
    demo.add_argument("--turns", type=int, default=30, help="model calls to make (default 30)")
    demo.add_argument("--home", type=pathlib.Path, default=pathlib.Path(".agentctx"),
                      help="where `agentctx up` keeps certificates, data and logs (default .agentctx)")
    demo.add_argument("--context-port", type=int, default=50051)
    demo.add_argument("--cache-port", type=int, default=50052)
    demo.add_argument("--target", help="a running context service (default 127.0.0.1:CONTEXT_PORT)")
    demo.add_argument("--certs", type=pathlib.Path, help="CA and client certificate directory (default HOME/certs)")
    demo.add_argument("--client", default="agent-client", help="client certificate stem (default agent-client)")
    demo.add_argument("--server-name", default="localhost", help="name to verify on the server certificate")
    demo.add_argument("--no-start", action="store_true", help="fail instead of starting a pair when none answers")
    demo.add_argument("--no-color", action="store_true", help="plain output even on a terminal")
    demo.add_argument("--pace", type=float, default=None, metavar="SECONDS",
                      help=f"pause between calls (default {TTY_PACE_S} on a terminal, 0 otherwise)")
    demo.set_defaults(func=run)


def _connection(target: str, certs: pathlib.Path, client: str = "agent-client",
                server_name: str = "localhost") -> argparse.Namespace:
    return argparse.Namespace(target=target, certs=certs, client=client, server_name=server_name)


async def _serving(conn: argparse.Namespace) -> bool:
    async with open_channel(conn) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.aio.AioRpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


async def show_demo(
    conn: argparse.Namespace, turns: int, out: TextIO, *, color: bool, progress: bool, pace_s: float = 0.0
) -> DemoResult:
    """Runs the demo against the context service at ``conn.target``,
    printing as it goes."""
    screen = Screen(out, color=color, progress=progress, total=turns)
    screen.intro(conn.target)
    async with open_channel(conn) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        try:
            result = await run_demo(stub, turns=turns, on_turn=screen.row, pace_s=pace_s)
        except grpc.aio.AioRpcError as err:
            raise rpc_failure(err, conn.target) from None
    hint = f"agentctx inspect context-lifecycle {APP} {USER} {result.session_id}"
    if conn.target != "127.0.0.1:50051":
        hint += f" --target {conn.target} --certs {conn.certs}"
    screen.summary(result, hint)
    return result


def _interactive(out: TextIO, no_color: bool) -> tuple[bool, bool, float]:
    """Color, progress bar and pace: only a person at a terminal needs them."""
    tty = out.isatty()
    return tty and not no_color, tty, TTY_PACE_S if tty else 0.0


def run_demo_once(target: str, certs: pathlib.Path, turns: int) -> bool:
    """For ``agentctx up``: the demo against its pair; False (after one line
    on stderr) when it failed."""
    color, progress, pace = _interactive(sys.stdout, False)
    try:
        asyncio.run(show_demo(_connection(target, certs), turns, sys.stdout, color=color, progress=progress,
                              pace_s=pace))
    except AgentCtxError as exc:
        print(f"\nagentctx: the demo failed: {exc.code.value}: {exc.message}", file=sys.stderr)
        return False
    return True


def run(args: argparse.Namespace) -> int:
    from agentctx_common.cli.up_cmd import start_pair, stop_pair
    from agentctx_common.errors import ConfigError

    if args.turns < 1:
        raise ConfigError("--turns must be at least 1")
    home = args.home.resolve()
    conn = _connection(args.target or f"127.0.0.1:{args.context_port}", args.certs or home / "certs",
                       args.client, args.server_name)
    procs: list[subprocess.Popen] = []
    try:
        if not (conn.certs / "ca.pem").exists() or not asyncio.run(_serving(conn)):
            if args.no_start or args.target:
                raise ConfigError(f"no context service answers at {conn.target} (start one with `agentctx up`)")
            print(f"No service pair answers at {conn.target}: starting one from {home} for this demo "
                  f"(logs in {home / 'logs'}).", flush=True)
            start_pair(home, args.context_port, args.cache_port, procs)
        color, progress, pace = _interactive(sys.stdout, args.no_color)
        asyncio.run(show_demo(conn, args.turns, sys.stdout, color=color, progress=progress,
                              pace_s=pace if args.pace is None else max(0.0, args.pace)))
    except KeyboardInterrupt:
        return 130
    finally:
        if procs:
            stop_pair(procs)
            print("stopped the services started for the demo; `agentctx up` (or `make up`) keeps a pair running, "
                  "with this demo, so that you can inspect its sessions", flush=True)
    return 0
