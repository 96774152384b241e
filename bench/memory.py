"""Memory and failure codes of the context service under many large appends.

The context service runs as its own process (``agentctx serve context``,
mTLS, SQLite, the deployment shape). ``--connections`` agents, each on its
own connection and session, append one event of ``--event-mib`` MiB at the
same time, ``--rounds`` times. An agent that gets RESOURCE_EXHAUSTED with
RetryInfo waits the delay it was given (plus jitter) and tries again, up to
``--attempts`` times, as an agent would; nothing else is retried.

Figures: the server's RSS at rest before the load (``baseline_rss_mb``), its
peak during the load (``peak_rss_mb``, VmHWM), its RSS after
``--idle-s`` seconds idle (``idle_rss_mb``); the status codes of every
attempt (``attempt_codes``) and of each append's last attempt
(``final_codes``), how many RESOURCE_EXHAUSTED carried RetryInfo, and the
seconds each non-OK, non-RESOURCE_EXHAUSTED call took. Bar: peak under
``BAR_PEAK_MB`` and no code other than OK or RESOURCE_EXHAUSTED.

Then failed turns: no cache service runs, so every Generate fails
(UNAVAILABLE, CACHE_SERVICE_UNAVAILABLE) after its input is stored and its
context built. ``--failed-connections`` agents each resend one Generate of
``--failed-mib`` MiB (the same ids: a retry, so the history does not grow)
``--failed-calls`` times a round, for ``--failed-rounds`` rounds; the
server's idle RSS after each round is ``failed_idle_rss_mb``. Bar: every
round's idle RSS within 10% of the first's (``failed_idle_growth``), since
a failed call must leave nothing behind.

Run: ``.venv/bin/python -m bench.memory`` from the repository root; extra
``--context KEY=VALUE`` pairs go into the service's ``[context]`` table (for
example ``--context max_inflight_rpcs=8``). Loopback only; every call has a
deadline, so a run is bounded. The last line is one JSON object with every
figure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import pathlib
import random
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import event_pb2
from agentctx_common.certs import init_dev_certs
from agentctx_common.status import error_from_rpc
from agentctx_common.tls import channel_credentials
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config

BAR_PEAK_MB = 1536
BAR_FAILED_GROWTH = 1.10
# A failed turn's codes: the cache service is down, or the in-flight byte
# bound refused the resend (with RetryInfo).
FAILED_CODES = {"UNAVAILABLE/CACHE_SERVICE_UNAVAILABLE", "RESOURCE_EXHAUSTED/SERVER_OVERLOADED"}
APP = "bench-memory"
CALL_TIMEOUT_S = 120.0


def _status_kb(pid: int, field: str) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _mb(kb: int) -> float:
    return round(kb / 1024, 1)


class RssSampler:
    """Samples a process's RSS in a thread, so a busy event loop here does
    not hide the peak (VmHWM is the kernel's own peak as well)."""

    def __init__(self, pid: int, every_s: float = 0.05) -> None:
        self.pid, self.every_s = pid, every_s
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(_status_kb(self.pid, "VmRSS"))
            except (OSError, KeyError):
                return
            self._stop.wait(self.every_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _channel(port: int, certs: pathlib.Path) -> grpc.aio.Channel:
    creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
    # A local subchannel pool: one TCP connection per agent, as separate
    # processes would have, instead of one shared by every channel.
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=[
        ("grpc.ssl_target_name_override", "localhost"), ("grpc.use_local_subchannel_pool", 1),
        # AppendEvent answers with the stored event, as large as the request.
        ("grpc.max_send_message_length", 64 * 1024 * 1024), ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ])


def _event(text: str) -> event_pb2.Event:
    event = event_pb2.Event(id=uuid.uuid4().hex, author="user")
    event.content.role = "user"
    event.content.parts.add().text = text
    return event


class Tally:
    def __init__(self) -> None:
        self.attempts: collections.Counter[str] = collections.Counter()
        self.final: collections.Counter[str] = collections.Counter()
        self.retry_info = 0
        self.reasons: collections.Counter[str] = collections.Counter()
        self.failed_after_s: list[float] = []


async def _append(stub: Any, session: str, text: str, attempts: int, tally: Tally) -> None:
    request = pb.AppendEventRequest(parent=session, event=_event(text))
    code = "OK"
    for _ in range(attempts):
        started = time.monotonic()
        try:
            await stub.AppendEvent(request, timeout=CALL_TIMEOUT_S)
            code = "OK"
            tally.attempts[code] += 1
            break
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            tally.attempts[code] += 1
            err = error_from_rpc(exc)
            tally.reasons[f"{code}/{err.wire_reason}: {(exc.details() or '')[:60]}"] += 1
            if exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and err.retry_after is not None:
                tally.retry_info += 1
                await asyncio.sleep(err.retry_after * (1 + random.random()))
                continue
            tally.failed_after_s.append(round(time.monotonic() - started, 2))
            break
    tally.final[code] += 1


async def _load(port: int, certs: pathlib.Path, args: argparse.Namespace) -> Tally:
    text = "x" * (int(args.event_mib * 1024 * 1024) - 4096)
    channels = [_channel(port, certs) for _ in range(args.connections)]
    try:
        stubs = [context_service_pb2_grpc.ContextServiceStub(ch) for ch in channels]
        sessions = []
        for i, stub in enumerate(stubs):  # also opens each connection before the load
            created = await stub.CreateSession(
                pb.CreateSessionRequest(parent=f"apps/{APP}/users/u{i}"), timeout=CALL_TIMEOUT_S
            )
            sessions.append(created.name)
        tally = Tally()
        for _ in range(args.rounds):
            await asyncio.gather(*(
                _append(stub, name, text, args.attempts, tally) for stub, name in zip(stubs, sessions, strict=True)
            ))
        return tally
    finally:
        for ch in channels:
            await ch.close()


def _generate_request(session: str, text: str) -> pb.GenerateRequest:
    request = pb.GenerateRequest(session=session, input=[_event(text)], model="local-sim-1")
    request.invocation_id = uuid.uuid4().hex
    return request


async def _failed_turns(port: int, certs: pathlib.Path, args: argparse.Namespace, pid: int) -> tuple[list[float], Any]:
    """Idle RSS (MB) after each round of failed Generate calls, and the codes."""
    text = "x" * (int(args.failed_mib * 1024 * 1024) - 4096)
    codes: collections.Counter[str] = collections.Counter()
    channels = [_channel(port, certs) for _ in range(args.failed_connections)]
    try:
        stubs = [context_service_pb2_grpc.ContextServiceStub(ch) for ch in channels]
        requests = []
        for i, stub in enumerate(stubs):
            created = await stub.CreateSession(
                pb.CreateSessionRequest(parent=f"apps/{APP}/users/failed{i}"), timeout=CALL_TIMEOUT_S
            )
            requests.append(_generate_request(created.name, text))

        async def resend(stub: Any, request: pb.GenerateRequest) -> None:
            for _ in range(args.failed_calls):
                try:
                    await stub.Generate(request, timeout=CALL_TIMEOUT_S)
                    codes["OK"] += 1
                except grpc.aio.AioRpcError as exc:
                    codes[f"{exc.code().name}/{error_from_rpc(exc).wire_reason}"] += 1

        idle: list[float] = []
        for _ in range(args.failed_rounds):
            await asyncio.gather(*(resend(stub, r) for stub, r in zip(stubs, requests, strict=True)))
            await asyncio.sleep(args.failed_idle_s)
            idle.append(_mb(_status_kb(pid, "VmRSS")))
        return idle, dict(codes)
    finally:
        for ch in channels:
            await ch.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        certs = root / "certs"
        certs.mkdir()
        init_dev_certs(certs)
        port = free_port()
        config = write_config(
            root / "agentctx.toml", certs, context_port=port, cache_port=free_port(), data_dir=root / "data",
            context={"log_level": "WARNING", "compaction_worker": False, **args.context},
        )
        proc = spawn("context", config, root / "context.log")
        try:
            wait_healthy(port, certs, "agent-client", proc)
            time.sleep(1.0)
            baseline = _status_kb(proc.pid, "VmRSS")
            started = time.monotonic()
            with RssSampler(proc.pid) as load_rss:
                tally = asyncio.run(_load(port, certs, args))
            load_s = time.monotonic() - started
            peak = max(_status_kb(proc.pid, "VmHWM"), *load_rss.samples)
            print(f"load done in {load_s:.1f} s; idle for {args.idle_s} s (server pid {proc.pid})", file=sys.stderr, flush=True)
            with RssSampler(proc.pid, every_s=0.5) as idle_rss:
                time.sleep(args.idle_s)
            idle = min(idle_rss.samples[-3:]) if idle_rss.samples else _status_kb(proc.pid, "VmRSS")
            failed_idle, failed_codes = asyncio.run(_failed_turns(port, certs, args, proc.pid))
            alive = proc.poll() is None
        finally:
            stop(proc)
    other = {k: v for k, v in tally.attempts.items() if k not in ("OK", "RESOURCE_EXHAUSTED")}
    failed_growth = round(max(failed_idle) / failed_idle[0], 3)
    return {
        "connections": args.connections, "rounds": args.rounds, "event_mib": args.event_mib,
        "context_settings": args.context,
        "baseline_rss_mb": _mb(baseline), "peak_rss_mb": _mb(peak), "idle_rss_mb": _mb(idle),
        "idle_after_s": args.idle_s, "load_s": round(load_s, 1),
        "attempt_codes": dict(tally.attempts), "final_codes": dict(tally.final),
        "resource_exhausted_with_retry_info": tally.retry_info,
        "reasons": dict(tally.reasons), "other_failures_after_s": sorted(tally.failed_after_s),
        "server_alive": alive,
        "failed_connections": args.failed_connections, "failed_calls": args.failed_calls,
        "failed_mib": args.failed_mib, "failed_idle_rss_mb": failed_idle, "failed_codes": failed_codes,
        "failed_idle_growth": failed_growth,
        "bar_peak_mb": BAR_PEAK_MB, "bar_failed_idle_growth": BAR_FAILED_GROWTH,
        "pass": alive and not other and _mb(peak) < BAR_PEAK_MB and failed_growth <= BAR_FAILED_GROWTH
                and set(failed_codes) <= FAILED_CODES,
    }


def _setting(pair: str) -> tuple[str, Any]:
    key, _, raw = pair.partition("=")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--event-mib", type=float, default=8.0)
    parser.add_argument("--attempts", type=int, default=30, help="tries per append on RESOURCE_EXHAUSTED")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--failed-connections", type=int, default=16)
    parser.add_argument("--failed-calls", type=int, default=8, help="resends of one Generate per agent a round")
    parser.add_argument("--failed-rounds", type=int, default=3)
    parser.add_argument("--failed-mib", type=float, default=8.0)
    parser.add_argument("--failed-idle-s", type=float, default=3.0)
    parser.add_argument("--context", type=_setting, action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    args.context = dict(args.context)
    figures = run(args)
    for key, value in figures.items():
        print(f"{key:>36}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
