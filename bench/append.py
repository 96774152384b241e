"""AppendEvent throughput through gRPC against the raw driver, on SQLite and
PostgreSQL, at concurrency 1 and 32.

The baseline, measured in the same run on the same database: the same event
rows inserted with sqlite3 / asyncpg directly, one transaction per row (at
concurrency 32: 32 connections, each inserting its own rows). The gRPC side
runs the context service as its own process (``agentctx serve context``,
mTLS, the deployment shape) and drives it from this process over one
channel: at concurrency 32, 32 appenders on 32 sessions, and also 32 on one
session. The floor is empty unary calls (health Check) on the same server:
what a Python gRPC server can answer at all on this machine; every gRPC
ratio is also reported against it (``*_floor_ratio``: appends per second
over empty calls per second on the same server at the same concurrency).
More than one core: the same service as ``--workers 2`` (two processes on
one port, SO_REUSEPORT) on the same database, driven at concurrency 32 over
4 connections (the kernel spreads connections, not calls, over workers),
against one worker driven the same way in the same run:
``*_c32_workers2_ratio`` (two workers over one) and
``*_c32_workers2_floor_ratio``. The client is one Python process on the
same machine, so on 2 cores it competes with the workers for CPU. Every append is durable when acknowledged (SQLite synchronous=FULL,
PostgreSQL synchronous_commit on), so group commit is what lets the service
beat a transaction per row.

Bar: gRPC rate >= 0.5x the raw rate at concurrency 32 on both backends.
Measurements alternate in rounds and the medians are reported, so load
from other processes falls on both sides of each ratio.

CPU per call, which the machine's load moves far less than wall time
(bench/cputime.py, /proc): ``*_service_cpu_ms`` (user + system of the
server process and its workers per call), ``*_driver_cpu_ms`` (this
process's: the raw driver per row, or the gRPC client per call) and
``*_c1_cpu_ratio`` / ``*_c32_cpu_ratio`` (service CPU per append over the
raw driver's per row). ``*_spread``: each figure's max over min across
rounds; ``*_unreliable_ratios`` names the wall-clock ratios one of whose
sides varied by more than 1.5x (SQLite's per-row disk syncs swing with the
machine's other I/O): those say more about the machine than the code.

Run: ``.venv/bin/python -m bench.append`` from the repository root
(``--events-c1 N --events-c32 N --backends sqlite,postgres``; PostgreSQL at
AGENTCTX_BENCH_PG_ADMIN, default postgresql://postgres@127.0.0.1:5432/test,
is skipped when unreachable). The last line is one JSON object with every
figure.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import os
import pathlib
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import event_pb2
from agentctx_common.certs import SAMPLE_AGENT_ID, init_dev_certs
from agentctx_common.tls import channel_credentials
from bench import cputime
from context_service.domain.model import Content, Event, Part
from context_service.storage import codec, schema
from context_service.storage.engine import create_engine

# Connections the client opens for the workers comparison (both sides).
WORKER_CONNECTIONS = 4
PG_ADMIN = os.environ.get("AGENTCTX_BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/test")
TEXT = "The user asked about the weather in Paris and the agent looked it up. " * 4  # ~280 bytes
APP, USER = "bench", "u"


# --- the rows both sides write ---------------------------------------------------


def _row(session_pk: int, sequence: int) -> tuple[Any, ...]:
    """One events row exactly as the service stores an AppendEvent."""
    event = Event(id=uuid.uuid4().hex, author="user", content=Content("user", (Part(text=TEXT),)))
    body = codec.event_body(event)
    now = dt.datetime.now(dt.UTC)
    return (session_pk, sequence, event.id, "MESSAGE", "user", "", "", False, False, now,
            codec.event_fingerprint(event, body), codec.FINGERPRINT_VERSION, body)


INSERT_SQLITE = ("INSERT INTO events (session_pk, sequence, event_id, kind, author, invocation_id, branch, partial, "
                 "turn_complete, create_time, fingerprint, fingerprint_version, body_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
INSERT_PG = INSERT_SQLITE.replace("?", "${}").format(*range(1, 14))
SESSION_SQL = ("INSERT INTO sessions (app, user_id, session_id, incarnation, version, last_sequence, event_count, "
               "state_json, config_json, create_time, update_time) VALUES ('raw', 'u', '{}', 'x', 1, 0, 0, '{{}}', "
               "'{{}}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


# --- raw SQLite ------------------------------------------------------------------------


def _sqlite_connect(path: pathlib.Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _sqlite_session(conn: sqlite3.Connection, name: str) -> int:
    conn.execute(SESSION_SQL.format(name))
    return conn.execute("SELECT pk FROM sessions WHERE session_id = ?", (name,)).fetchone()[0]


def raw_sqlite(path: pathlib.Path, concurrency: int, total: int) -> float:
    """Rows per second, one BEGIN IMMEDIATE ... COMMIT per row."""
    setup = _sqlite_connect(path)
    pk = _sqlite_session(setup, f"raw-{uuid.uuid4().hex}")
    setup.close()
    sequences = itertools.count(1)
    lock = threading.Lock()
    rows = [_row(pk, 0) for _ in range(total)]

    def worker(mine: list[tuple[Any, ...]]) -> None:
        conn = _sqlite_connect(path)
        for row in mine:
            with lock:
                seq = next(sequences)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(INSERT_SQLITE, (*row[:1], seq, *row[2:]))
            conn.execute("COMMIT")
        conn.close()

    threads = [threading.Thread(target=worker, args=(rows[i::concurrency],)) for i in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return total / (time.perf_counter() - started)


# --- raw PostgreSQL ------------------------------------------------------------------------


async def raw_postgres(dsn: str, concurrency: int, total: int) -> float:
    import asyncpg

    setup = await asyncpg.connect(dsn)
    name = f"raw-{uuid.uuid4().hex}"
    await setup.execute(SESSION_SQL.format(name))
    pk = await setup.fetchval("SELECT pk FROM sessions WHERE session_id = $1", name)
    await setup.close()
    rows = [_row(pk, i + 1) for i in range(total)]
    conns = [await asyncpg.connect(dsn) for _ in range(concurrency)]

    async def worker(conn: Any, mine: list[tuple[Any, ...]]) -> None:
        for row in mine:
            async with conn.transaction():
                await conn.execute(INSERT_PG, *row)

    started = time.perf_counter()
    await asyncio.gather(*(worker(c, rows[i::concurrency]) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - started
    for conn in conns:
        await conn.close()
    return total / elapsed


# --- the service -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_service(
    tmp: pathlib.Path, certs: pathlib.Path, db_url: str, workers: int = 1
) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    config = tmp / f"context-{port}.toml"
    config.write_text("\n".join([
        "[context]",
        'host = "127.0.0.1"', f"port = {port}",
        f'tls_cert = "{certs}/context-server.pem"', f'tls_key = "{certs}/context-server.key"',
        f'tls_client_ca = "{certs}/ca.pem"', "require_client_cert = true",
        f'app_grants = {{ "{SAMPLE_AGENT_ID}" = ["*"] }}',
        f'data_dir = "{tmp}"', f'database_url = "{db_url}"', 'log_level = "WARNING"',
    ]) + "\n")
    log = open(tmp / f"context-{port}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentctx_cli.main", "serve", "context", "--config", str(config),
         "--workers", str(workers)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the context service exited; see {tmp}")
        with grpc.secure_channel(f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "localhost")]) as ch:
            try:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1)
                return proc, port
            except grpc.RpcError:
                time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the context service did not become healthy")


def _event() -> event_pb2.Event:
    event = event_pb2.Event(id=uuid.uuid4().hex, author="user")
    event.content.role = "user"
    event.content.parts.add().text = TEXT
    return event


def _channels(port: int, certs: pathlib.Path, count: int) -> list[grpc.aio.Channel]:
    """``count`` channels, each its own connection (a local subchannel pool)."""
    creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
    options = [("grpc.ssl_target_name_override", "localhost"), ("grpc.use_local_subchannel_pool", 1)]
    return [grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=options) for _ in range(count)]


async def grpc_rate(
    port: int, certs: pathlib.Path, concurrency: int, total: int, sessions: int, connections: int = 1
) -> float:
    channels = _channels(port, certs, connections)
    try:
        return await _grpc_rate(channels, concurrency, total, sessions)
    finally:
        for channel in channels:
            await channel.close()


async def _grpc_rate(channels: list[grpc.aio.Channel], concurrency: int, total: int, sessions: int) -> float:
    stubs = [context_service_pb2_grpc.ContextServiceStub(c) for c in channels]
    stub = stubs[0]
    names = []
    for _ in range(sessions):
        created = await stub.CreateSession(pb.CreateSessionRequest(parent=f"apps/{APP}/users/{USER}"))
        names.append(created.name)
    for name in names:  # warm up every session and the connection
        await stub.AppendEvent(pb.AppendEventRequest(parent=name, event=_event()))
    per_worker = total // concurrency
    requests = [
        [pb.AppendEventRequest(parent=names[w % sessions], event=_event()) for _ in range(per_worker)]
        for w in range(concurrency)
    ]

    for extra in stubs[1:]:  # every connection up before the clock starts
        await extra.AppendEvent(pb.AppendEventRequest(parent=names[0], event=_event()))

    async def worker(mine: list[pb.AppendEventRequest], own: Any) -> None:
        for request in mine:
            await own.AppendEvent(request)

    started = time.perf_counter()
    await asyncio.gather(*(worker(r, stubs[w % len(stubs)]) for w, r in enumerate(requests)))
    return per_worker * concurrency / (time.perf_counter() - started)


async def floor_rate(port: int, certs: pathlib.Path, concurrency: int, total: int, connections: int = 1) -> float:
    """Empty unary calls (grpc.health.v1 Check) on the same server: what any
    RPC costs here, the ceiling for AppendEvent."""
    channels = _channels(port, certs, connections)
    try:
        healths = [health_pb2_grpc.HealthStub(c) for c in channels]
        request = health_pb2.HealthCheckRequest()
        for health in healths:
            await health.Check(request)

        async def worker(health: Any) -> None:
            for _ in range(total // concurrency):
                await health.Check(request)

        started = time.perf_counter()
        await asyncio.gather(*(worker(healths[w % len(healths)]) for w in range(concurrency)))
        return total // concurrency * concurrency / (time.perf_counter() - started)
    finally:
        for channel in channels:
            await channel.close()


# --- driver ---------------------------------------------------------------------------------------


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await schema.upgrade(engine)
    finally:
        await engine.dispose()


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def run_backend(backend: str, tmp: pathlib.Path, certs: pathlib.Path, n1: int, n32: int, rounds: int) -> dict[str, float]:
    if backend == "sqlite":
        path = tmp / "bench.db"
        url, dsn = f"sqlite:///{path}", ""
    else:
        name = f"agentctx_bench_{os.getpid()}"
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
        dsn = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
        url = dsn.replace("postgresql://", "postgresql+asyncpg://")

    def raw(c: int, n: int) -> float:
        return raw_sqlite(path, c, n) if backend == "sqlite" else asyncio.run(raw_postgres(dsn, c, n))

    try:
        asyncio.run(_migrate(url))
        proc, port = start_service(tmp, certs, url)
        procs = [proc]
        samples: dict[str, list[float]] = {}
        cpu: dict[str, list[tuple[float, float]]] = {}  # per round: (service, driver) CPU ms per call
        try:
            proc2, port2 = start_service(tmp, certs, url, workers=2)
            procs.append(proc2)
            # Interleaved rounds, medians: load from other processes on the
            # machine then falls on both sides of each ratio alike.
            one, two = [proc.pid], [proc2.pid]
            for _ in range(rounds):
                for label, pids, calls, measure in (
                    ("raw_c1", [], n1, lambda: raw(1, n1)),
                    ("grpc_c1", one, n1, lambda: asyncio.run(grpc_rate(port, certs, 1, n1, 1))),
                    ("grpc_floor_c1", one, n1, lambda: asyncio.run(floor_rate(port, certs, 1, n1))),
                    ("raw_c32", [], n32, lambda: raw(32, n32)),
                    ("grpc_c32", one, n32, lambda: asyncio.run(grpc_rate(port, certs, 32, n32, 32))),
                    ("grpc_c32_one_session", one, n32, lambda: asyncio.run(grpc_rate(port, certs, 32, n32, 1))),
                    ("grpc_floor_c32", one, n32, lambda: asyncio.run(floor_rate(port, certs, 32, n32))),
                    ("grpc_c32_workers1", one, n32,
                     lambda: asyncio.run(grpc_rate(port, certs, 32, n32, 32, WORKER_CONNECTIONS))),
                    ("grpc_c32_workers2", two, n32,
                     lambda: asyncio.run(grpc_rate(port2, certs, 32, n32, 32, WORKER_CONNECTIONS))),
                    ("grpc_floor_c32_workers1", one, n32,
                     lambda: asyncio.run(floor_rate(port, certs, 32, n32, WORKER_CONNECTIONS))),
                    ("grpc_floor_c32_workers2", two, n32,
                     lambda: asyncio.run(floor_rate(port2, certs, 32, n32, WORKER_CONNECTIONS))),
                ):
                    meter = cputime.Meter(pids).start()
                    samples.setdefault(label, []).append(measure())
                    meter.stop()
                    # Setup (sessions, warm-up calls) is inside the block: a
                    # few calls more than counted, on every side alike.
                    cpu.setdefault(label, []).append((meter.servers_s * 1e3 / calls, meter.driver_s * 1e3 / calls))
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(timeout=60)
        figures = {f"{backend}_{label}_eps": round(statistics.median(v), 1) for label, v in samples.items()}
        for label, c in (("c1", 1), ("c32", 32), ("c32_one_session", 32)):
            figures[f"{backend}_{label}_ratio"] = round(
                figures[f"{backend}_grpc_{label}_eps"] / figures[f"{backend}_raw_c{c}_eps"], 3
            )
        # Against the empty-call floor of the same server, same concurrency.
        for label, floor in (("c1", "floor_c1"), ("c32", "floor_c32"), ("c32_one_session", "floor_c32"),
                             ("c32_workers1", "floor_c32_workers1"), ("c32_workers2", "floor_c32_workers2")):
            figures[f"{backend}_{label}_floor_ratio"] = round(
                figures[f"{backend}_grpc_{label}_eps"] / figures[f"{backend}_grpc_{floor}_eps"], 3
            )
        figures[f"{backend}_c32_workers2_ratio"] = round(
            figures[f"{backend}_grpc_c32_workers2_eps"] / figures[f"{backend}_grpc_c32_workers1_eps"], 3
        )
        figures[f"{backend}_floor_c32_workers2_ratio"] = round(
            figures[f"{backend}_grpc_floor_c32_workers2_eps"] / figures[f"{backend}_grpc_floor_c32_workers1_eps"], 3
        )
        # CPU per call: the service's (the server process and its workers;
        # user + system) and the driver's (this process: the raw driver, or
        # the gRPC client). Database servers' CPU (PostgreSQL) is in neither.
        for label, per_round in cpu.items():
            service = statistics.median(r[0] for r in per_round)
            figures[f"{backend}_{label}_driver_cpu_ms"] = round(statistics.median(r[1] for r in per_round), 4)
            if not label.startswith("raw"):
                figures[f"{backend}_{label}_service_cpu_ms"] = round(service, 4)
        for label in ("c1", "c32"):
            # Service CPU per append over the raw driver's per row: what a
            # core does for one durable append, whatever the wall clock did.
            figures[f"{backend}_{label}_cpu_ratio"] = round(
                figures[f"{backend}_grpc_{label}_service_cpu_ms"] / figures[f"{backend}_raw_{label}_driver_cpu_ms"], 3)
        # Each side's spread across rounds (max/min); a ratio whose side
        # varied past SPREAD_LIMIT says more about the machine than the code.
        for label, values in samples.items():
            figures[f"{backend}_{label}_spread"] = cputime.spread(values)
        unreliable = []
        for ratio, sides in ((f"{backend}_c1_ratio", ("raw_c1", "grpc_c1")),
                             (f"{backend}_c32_ratio", ("raw_c32", "grpc_c32")),
                             (f"{backend}_c32_one_session_ratio", ("raw_c32", "grpc_c32_one_session")),
                             (f"{backend}_c32_workers2_ratio", ("grpc_c32_workers1", "grpc_c32_workers2"))):
            if not cputime.meaningful(*(figures[f"{backend}_{side}_spread"] for side in sides)):
                unreliable.append(ratio)
        figures[f"{backend}_unreliable_ratios"] = unreliable
        # Against the better raw rate at either concurrency (SQLite's 32
        # per-row writers mostly wait on each other's lock).
        best_raw = max(figures[f"{backend}_raw_c1_eps"], figures[f"{backend}_raw_c32_eps"])
        figures[f"{backend}_c32_vs_best_raw_ratio"] = round(figures[f"{backend}_grpc_c32_eps"] / best_raw, 3)
        # The ceiling: the same server answering empty calls, over raw.
        figures[f"{backend}_floor_c32_ratio"] = round(
            figures[f"{backend}_grpc_floor_c32_eps"] / figures[f"{backend}_raw_c32_eps"], 3
        )
        return figures
    finally:
        if backend == "postgres":
            asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "agentctx_bench_{os.getpid()}" WITH (FORCE)'))


def _postgres_reachable() -> bool:
    try:
        asyncio.run(_pg_admin("SELECT 1"))
        return True
    except Exception:  # noqa: BLE001 - any failure means "skip it"
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-c1", type=int, default=1000)
    parser.add_argument("--events-c32", type=int, default=6400)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    figures: dict[str, Any] = {
        "events_c1": args.events_c1, "events_c32": args.events_c32, "rounds": args.rounds, "cpus": os.cpu_count(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        for backend in args.backends.split(","):
            if backend == "postgres" and not _postgres_reachable():
                print(f"postgres: skipped, {PG_ADMIN.rsplit('@', 1)[-1]} is not reachable")
                continue
            result = run_backend(backend, tmp, certs, args.events_c1, args.events_c32, args.rounds)
            figures.update(result)
            for c in ("c1", "c32", "c32_one_session", "floor_c32"):
                raw = result[f"{backend}_raw_{'c1' if c == 'c1' else 'c32'}_eps"]
                print(f"{backend} {c:>16}: gRPC {result[f'{backend}_grpc_{c}_eps']:8.0f}/s  "
                      f"raw per-row {raw:8.0f}/s  ratio {result[f'{backend}_{c}_ratio']:.2f}")
            for c in ("c1", "c32"):
                print(f"{backend} {c:>16}: CPU ms per append: service "
                      f"{result[f'{backend}_grpc_{c}_service_cpu_ms']:.3f}, client "
                      f"{result[f'{backend}_grpc_{c}_driver_cpu_ms']:.3f}; raw driver per row "
                      f"{result[f'{backend}_raw_{c}_driver_cpu_ms']:.3f}")
            if result[f"{backend}_unreliable_ratios"]:
                print(f"{backend}: a side varied more than {cputime.SPREAD_LIMIT}x across rounds, so these ratios "
                      f"are not meaningful in this run: {', '.join(result[f'{backend}_unreliable_ratios'])}")
    figures["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    for backend in ("sqlite", "postgres"):
        if f"{backend}_c32_ratio" in figures:
            figures[f"{backend}_c32_meets_bar"] = figures[f"{backend}_c32_ratio"] >= 0.5
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
