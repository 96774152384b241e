"""The demo on a screen: against the context service at a target, with a
progress bar and pace only for a person at a terminal."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import shlex
import sys
from typing import TextIO

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

import agentctx_client
from agentctx_cli.connect import DEFAULT_TARGET, open_client, rpc_failure
from agentctx_cli.demo.display import Screen
from agentctx_cli.demo.pricing import GEMINI, Shape
from agentctx_cli.demo.runner import APP, USER, DemoResult, run_demo
from agentctx_cli.invocation import agentctx
from agentctx_common.errors import AgentCtxError

# A 30-call demo takes about a second; on a terminal it is paced so that a
# person can watch the cache warm up (about 5 s in all).
TTY_PACE_S = 0.15
# Each call's deadline, retries included.
CALL_TIMEOUT_S = 30.0


def connection(target: str, certs: pathlib.Path, client: str = "agent-client",
               server_name: str = "localhost") -> argparse.Namespace:
    return argparse.Namespace(target=target, certs=certs, client=client, server_name=server_name)


async def serving(conn: argparse.Namespace) -> bool:
    """Whether the context service at ``conn.target`` reports SERVING. The
    standard gRPC health service is not agentctx's API, so it is asked over
    the client's channel rather than through a client method."""
    async with open_client(conn, timeout=2) as client:
        try:
            reply = await health_pb2_grpc.HealthStub(client.channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.aio.AioRpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def inspect_hint(conn: argparse.Namespace, session_id: str) -> list[str]:
    """The command that shows the demo's session, as shell lines of at most
    80 columns (continued with a backslash) but for a long certificate path."""
    lines = [f"{agentctx()} inspect context-lifecycle", f"    {APP} {USER} {session_id}"]
    if conn.target != DEFAULT_TARGET:
        lines += [f"    --target {conn.target}", f"    --certs {shlex.quote(str(conn.certs))}"]
    return [line + " \\" for line in lines[:-1]] + lines[-1:]


async def show_demo(
    conn: argparse.Namespace, turns: int, out: TextIO, *, color: bool, progress: bool, pace_s: float = 0.0,
    shape: Shape = GEMINI,
) -> DemoResult:
    """Runs the demo against the context service at ``conn.target``,
    printing as it goes."""
    screen = Screen(out, color=color, progress=progress, total=turns, shape=shape)
    screen.intro(conn.target)
    async with open_client(conn, timeout=CALL_TIMEOUT_S) as client:
        try:
            result = await run_demo(client, turns=turns, on_turn=screen.row, pace_s=pace_s, timeout_s=CALL_TIMEOUT_S,
                                    shape=shape)
        except agentctx_client.AgentCtxError as err:
            raise rpc_failure(err, conn.target) from None
    screen.summary(result, inspect_hint(conn, result.session_id))
    return result


def interactive(out: TextIO, no_color: bool) -> tuple[bool, bool, float]:
    """Color, progress bar and pace: only a person at a terminal needs them."""
    tty = out.isatty()
    return tty and not no_color, tty, TTY_PACE_S if tty else 0.0


def run_demo_once(target: str, certs: pathlib.Path, turns: int, shape: Shape = GEMINI) -> bool:
    """For ``agentctx up``: the demo against its pair; False (after one line
    on stderr) when it failed."""
    color, progress, pace = interactive(sys.stdout, False)
    try:
        asyncio.run(show_demo(connection(target, certs), turns, sys.stdout, color=color, progress=progress,
                              pace_s=pace, shape=shape))
    except AgentCtxError as exc:
        print(f"\nagentctx: the demo failed: {exc.code.value}: {exc.message}", file=sys.stderr)
        return False
    return True
