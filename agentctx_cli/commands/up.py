"""``agentctx up``: the service pair on embedded defaults (SQLite, the local
simulated provider, dev certificates), then the demo conversation against
it (``--no-demo`` skips it), then serving until Ctrl-C.

Each service runs in its own process, as in production; their logs go to
files under the home directory so the terminal stays readable.
"""

from __future__ import annotations

import argparse
import pathlib
import signal
import time

from agentctx_cli.arguments import positive_int
from agentctx_cli.demo.pricing import SHAPES
from agentctx_cli.demo.show import run_demo_once
from agentctx_cli.invocation import runnable
from agentctx_cli.pair import (
    DEFAULT_CACHE_PORT,
    DEFAULT_CONTEXT_PORT,
    Cluster,
    Pair,
    resolve_ports,
    service_exited,
    start_cluster,
    start_pair,
    stop_pair,
)
from agentctx_common.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser("up", help="start both services on embedded defaults")
    up.add_argument("--home", type=pathlib.Path, default=pathlib.Path(".agentctx"),
                    help="certificates, config, data and logs (default .agentctx)")
    up.add_argument("--context-port", type=int, default=None,
                    help="default: HOME/agentctx.toml's, else 50051 (--cluster: the first replica's)")
    up.add_argument("--cache-port", type=int, default=None, help="default: HOME/agentctx.toml's, else 50052")
    up.add_argument("--exit-when-ready", action="store_true",
                    help="stop both services once they are healthy (and the demo has run): a smoke test")
    up.add_argument("--no-demo", action="store_true", help="do not run the demo conversation once the pair is up")
    up.add_argument("--demo-turns", type=positive_int, default=30, help="model calls in the demo (default 30)")
    up.add_argument("--demo-provider", choices=sorted(SHAPES), default="gemini",
                    help="whose cache semantics and prices the demo's simulator imitates (default gemini)")
    up.add_argument("--cluster", action="store_true",
                    help="2 context replicas on PostgreSQL and 3 cache replicas on Redis (ports: base + 100 * i)")
    up.add_argument("--redis-url", default="redis://127.0.0.1:6379/0", help="--cluster: the cache tier's Redis")
    up.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                    help="--cluster: a PostgreSQL database to connect to for creating the cluster's database")
    up.add_argument("--cluster-database", default="agentctx_cluster",
                    help="--cluster: the context replicas' database (created and migrated if missing)")
    up.set_defaults(func=run)


def grpcurl_hint(home: pathlib.Path, context_port: int, cache_port: int) -> str:
    grpcurl = runnable("grpcurl")
    certs = home / "certs"
    agent = f"-cacert {certs}/ca.pem -cert {certs}/agent-client.pem -key {certs}/agent-client.key"
    ctx = f"-cacert {certs}/ca.pem -cert {certs}/context-client.pem -key {certs}/context-client.key"
    return "\n".join([
        "Try them with grpcurl:",
        f"  {grpcurl} {agent} 127.0.0.1:{context_port} list",
        f"  {grpcurl} {agent} 127.0.0.1:{context_port} describe agentctx.context.v1.ContextService",
        f"  {grpcurl} {agent} 127.0.0.1:{context_port} grpc.health.v1.Health/Check",
        f"  {grpcurl} {ctx} 127.0.0.1:{cache_port} list agentctx.cache.v1.CacheService",
        f"  {grpcurl} {agent} -d '{{\"parent\": \"apps/demo/users/alice\"}}' "
        f"127.0.0.1:{context_port} agentctx.context.v1.ContextService/CreateSession",
    ])


def config_line(path: pathlib.Path, written: bool, notes: list[str]) -> str:
    """What a start says about its config file: written now, or read as it
    is, with each setting of it that the command or the environment overrides."""
    if written:
        return f"wrote {path}; later starts read it as it is (edit it, or delete it for a fresh one)"
    lines = [f"read {path} (yours to edit; delete it for a fresh one)"]
    lines += [f"  {note}" for note in notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    pair: Pair
    if args.cluster:
        pair = Cluster(args.home.resolve(), args.context_port or DEFAULT_CONTEXT_PORT,
                       args.cache_port or DEFAULT_CACHE_PORT, redis_url=args.redis_url,
                       postgres_url=args.postgres_url, database=args.cluster_database)
    else:
        home = args.home.resolve()
        pair = Pair(home, *resolve_ports(home, args.context_port, args.cache_port))
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        target = f"127.0.0.1:{pair.context_port}"
        if isinstance(pair, Cluster):
            start_cluster(pair, "up")
            target = pair.context_target
            print(f"agentctx is up as a cluster: context replicas on {', '.join(map(str, pair.context_ports))} "
                  f"(TLS, PostgreSQL database {pair.database}), cache replicas on "
                  f"{', '.join(map(str, pair.cache_ports))} (mTLS, Redis)")
            print(f"home {pair.home}: certs/, data/, logs/ (context-N.log, cache-N.log), "
                  "agentctx-cluster-context.toml and agentctx-cluster-cache.toml (each replica gets its service's)")
        else:
            config = start_pair(pair, "up")
            print(f"agentctx is up: context service on 127.0.0.1:{pair.context_port} (TLS), "
                  f"cache service on 127.0.0.1:{pair.cache_port} (mTLS)")
            print(f"home {pair.home}: certs/, data/, logs/ (context.log, cache.log), agentctx.toml")
            print(config_line(config.path, config.written, config.notes))
        demo_failed = False
        if not args.no_demo:
            # Ctrl-C during the demo stops it and, as always, both services.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            demo_failed = not run_demo_once(target, pair.certs, args.demo_turns, SHAPES[args.demo_provider])
            signal.signal(signal.SIGINT, on_signal)
        print(grpcurl_hint(pair.home, pair.context_port, pair.cache_port))
        if args.exit_when_ready:
            return 1 if demo_failed else 0
        print("Ctrl-C stops both.", flush=True)
        while not stop["now"]:
            for proc in pair.procs:
                if proc.poll() is not None:
                    started = next((s for s in pair.started if s.proc is proc), None)
                    if started is None:
                        raise ConfigError(f"a service exited with status {proc.returncode}; see {pair.logs}")
                    port = pair.cache_port if started is pair.started[0] else pair.context_port
                    raise service_exited(f"the {started.log.stem} service", port, started)
            time.sleep(0.2)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        stop_pair(pair)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pair.procs:
            print("stopped every replica" if isinstance(pair, Cluster) else "stopped both services", flush=True)
