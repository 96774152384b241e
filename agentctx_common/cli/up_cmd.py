"""``agentctx up``: the service pair on embedded defaults (SQLite, the local
simulated provider, dev certificates), then the demo conversation against
it (``--no-demo`` skips it), then serving until Ctrl-C.

Each service runs in its own process, as in production; their logs go to
files under the home directory so the terminal stays readable.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

from agentctx_common.certs import SAMPLE_AGENT_ID
from agentctx_common.errors import ConfigError

CONFIG_TEMPLATE = """\
# Written by `agentctx up`. Environment variables (AGENTCTX_CONTEXT_*,
# AGENTCTX_CACHE_*) override these values.

[context]
host = "127.0.0.1"
port = {context_port}
tls_cert = "{certs}/context-server.pem"
tls_key = "{certs}/context-server.key"
tls_client_ca = "{certs}/ca.pem"
data_dir = "{home}/data"
cache_target = "127.0.0.1:{cache_port}"
cache_ca = "{certs}/ca.pem"
cache_cert = "{certs}/context-client.pem"
cache_key = "{certs}/context-client.key"
require_client_cert = true
app_grants = {{ "{sample_agent}" = ["*"] }}

[cache]
host = "127.0.0.1"
port = {cache_port}
tls_cert = "{certs}/cache-server.pem"
tls_key = "{certs}/cache-server.key"
tls_client_ca = "{certs}/ca.pem"
data_dir = "{home}/data"
"""


def register(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser("up", help="start both services on embedded defaults")
    up.add_argument("--home", type=pathlib.Path, default=pathlib.Path(".agentctx"),
                    help="certificates, config, data and logs (default .agentctx)")
    up.add_argument("--context-port", type=int, default=50051)
    up.add_argument("--cache-port", type=int, default=50052)
    up.add_argument("--exit-when-ready", action="store_true",
                    help="stop both services once they are healthy (and the demo has run): a smoke test")
    up.add_argument("--no-demo", action="store_true", help="do not run the demo conversation once the pair is up")
    up.add_argument("--demo-turns", type=int, default=30, help="model calls in the demo (default 30)")
    up.set_defaults(func=run)


def prepare_home(home: pathlib.Path, context_port: int, cache_port: int) -> pathlib.Path:
    """Creates certificates and the config file if missing; returns the
    config file."""
    from agentctx_common.certs import init_dev_certs

    home = home.resolve()
    certs = home / "certs"
    init_dev_certs(certs)
    (home / "data").mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(parents=True, exist_ok=True)
    config = home / "agentctx.toml"
    config.write_text(
        CONFIG_TEMPLATE.format(
            home=home, certs=certs, context_port=context_port, cache_port=cache_port, sample_agent=SAMPLE_AGENT_ID,
        )
    )
    return config


def _spawn(service: str, config: pathlib.Path, log_path: pathlib.Path) -> subprocess.Popen:
    log = open(log_path, "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "agentctx_common.cli.main", "serve", service, "--config", str(config)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_healthy(port: int, certs: pathlib.Path, client: str, deadline: float, proc: subprocess.Popen) -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from agentctx_common.tls import channel_credentials

    creds = channel_credentials(certs / "ca.pem", certs / f"{client}.pem", certs / f"{client}.key")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ConfigError(f"service on port {port} exited with status {proc.returncode}")
        with grpc.secure_channel(f"127.0.0.1:{port}", creds) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
        time.sleep(0.2)
    raise ConfigError(f"service on port {port} did not become healthy in time")


def grpcurl_hint(home: pathlib.Path, context_port: int, cache_port: int) -> str:
    grpcurl = shutil.which("grpcurl") or str(pathlib.Path(sys.executable).parent / "grpcurl")
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


def start_pair(home: pathlib.Path, context_port: int, cache_port: int, procs: list[subprocess.Popen]) -> None:
    """Starts both services from ``home`` (appending them to ``procs`` as
    they start, so the caller can stop whatever did start) and waits until
    both are healthy (ConfigError otherwise)."""
    config = prepare_home(home, context_port, cache_port)
    certs = home / "certs"
    procs.append(_spawn("cache", config, home / "logs" / "cache.log"))
    procs.append(_spawn("context", config, home / "logs" / "context.log"))
    deadline = time.monotonic() + 60
    wait_healthy(cache_port, certs, "context-client", deadline, procs[-2])
    wait_healthy(context_port, certs, "agent-client", deadline, procs[-1])


def stop_pair(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def run(args: argparse.Namespace) -> int:
    home = args.home.resolve()
    procs: list[subprocess.Popen] = []
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        start_pair(home, args.context_port, args.cache_port, procs)
        print(f"agentctx is up: context service on 127.0.0.1:{args.context_port} (TLS), "
              f"cache service on 127.0.0.1:{args.cache_port} (mTLS)")
        print(f"home {home}: certs/, data/, logs/ (context.log, cache.log), agentctx.toml")
        demo_failed = False
        if not args.no_demo:
            from agentctx_common.cli.demo_cmd import run_demo_once

            # Ctrl-C during the demo stops it and, as always, both services.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            demo_failed = not run_demo_once(f"127.0.0.1:{args.context_port}", home / "certs", args.demo_turns)
            signal.signal(signal.SIGINT, on_signal)
        print(grpcurl_hint(home, args.context_port, args.cache_port))
        if args.exit_when_ready:
            return 1 if demo_failed else 0
        print("Ctrl-C stops both.", flush=True)
        while not stop["now"]:
            for proc in procs:
                if proc.poll() is not None:
                    raise ConfigError(f"a service exited with status {proc.returncode}; see {home / 'logs'}")
            time.sleep(0.2)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        stop_pair(procs)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if procs:
            print("stopped both services", flush=True)
