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
import sys
import textwrap

from agentctx_cli.arguments import positive_int
from agentctx_cli.demo.pricing import SHAPES
from agentctx_cli.demo.show import TTY_PACE_S, connection, interactive, serving, show_demo
from agentctx_cli.invocation import agentctx
from agentctx_cli.pair import Pair, resolve_ports, start_pair, stop_pair
from agentctx_common.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="run a scripted agent conversation and show what the cache and compaction do")
    demo.add_argument("--turns", type=positive_int, default=30, help="model calls to make (default 30)")
    demo.add_argument("--provider", choices=sorted(SHAPES), default="gemini",
                      help="whose cache semantics and prices the local simulator imitates (default gemini)")
    demo.add_argument("--home", type=pathlib.Path, default=pathlib.Path(".agentctx"),
                      help="where `agentctx up` keeps certificates, data and logs (default .agentctx)")
    demo.add_argument("--context-port", type=int, default=None,
                      help="default: HOME/agentctx.toml's, else 50051")
    demo.add_argument("--cache-port", type=int, default=None, help="default: HOME/agentctx.toml's, else 50052")
    demo.add_argument("--target", help="a running context service (default 127.0.0.1:CONTEXT_PORT)")
    demo.add_argument("--certs", type=pathlib.Path, help="CA and client certificate directory (default HOME/certs)")
    demo.add_argument("--client", default="agent-client", help="client certificate stem (default agent-client)")
    demo.add_argument("--server-name", default="localhost", help="name to verify on the server certificate")
    demo.add_argument("--no-start", action="store_true", help="fail instead of starting a pair when none answers")
    demo.add_argument("--no-color", action="store_true", help="plain output even on a terminal")
    demo.add_argument("--pace", type=float, default=None, metavar="SECONDS",
                      help=f"pause between calls (default {TTY_PACE_S} on a terminal, 0 otherwise)")
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    home = args.home.resolve()
    pair = Pair(home, *resolve_ports(home, args.context_port, args.cache_port))
    conn = connection(args.target or f"127.0.0.1:{pair.context_port}", args.certs or home / "certs",
                      args.client, args.server_name)
    try:
        if not (conn.certs / "ca.pem").exists() or not asyncio.run(serving(conn)):
            if args.no_start or args.target:
                raise ConfigError(f"no context service answers at {conn.target} (start one with `agentctx up`)")
            print(f"No service pair answers at {conn.target}: starting one from {home} for this demo "
                  f"(logs in {home / 'logs'}).", flush=True)
            start_pair(pair, "demo")
        color, progress, pace = interactive(sys.stdout, args.no_color)
        asyncio.run(show_demo(conn, args.turns, sys.stdout, color=color, progress=progress,
                              pace_s=pace if args.pace is None else max(0.0, args.pace), shape=SHAPES[args.provider]))
    except KeyboardInterrupt:
        return 130
    finally:
        if pair.procs:
            stop_pair(pair)
            print(textwrap.fill(f"Stopped the services started for the demo. `{agentctx()} up` (or `make up`) keeps "
                                "a pair running, with this demo, so that you can inspect its sessions.", 79), flush=True)
    return 0
