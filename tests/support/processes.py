"""Services as real subprocesses (``agentctx serve ...``), for tests that
kill, restart or drive them with external clients such as grpcurl."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx_common.certs import SAMPLE_AGENT_ID
from agentctx_common.tls import channel_credentials


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + " }"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(
    path: pathlib.Path,
    certs: pathlib.Path,
    *,
    context_port: int,
    cache_port: int,
    data_dir: pathlib.Path,
    context: Mapping[str, Any] | None = None,
    cache: Mapping[str, Any] | None = None,
) -> pathlib.Path:
    """A TOML config for both services with the dev certificates."""
    ctx: dict[str, Any] = {
        "host": "127.0.0.1", "port": context_port,
        "tls_cert": certs / "context-server.pem", "tls_key": certs / "context-server.key",
        "data_dir": data_dir,
        "cache_target": f"127.0.0.1:{cache_port}", "cache_ca": certs / "ca.pem",
        "cache_cert": certs / "context-client.pem", "cache_key": certs / "context-client.key",
        "dev_anonymous_apps": ["*"],
        **(context or {}),
    }
    if ctx.get("require_client_cert"):  # certificate identities need a requested certificate
        ctx = {"tls_client_ca": certs / "ca.pem", "app_grants": {SAMPLE_AGENT_ID: ["*"]}, **ctx}
    cch: dict[str, Any] = {
        "host": "127.0.0.1", "port": cache_port,
        "tls_cert": certs / "cache-server.pem", "tls_key": certs / "cache-server.key",
        "tls_client_ca": certs / "ca.pem", "data_dir": data_dir,
        **(cache or {}),
    }
    lines = ["[context]", *(f"{k} = {_toml_value(v)}" for k, v in ctx.items()),
             "", "[cache]", *(f"{k} = {_toml_value(v)}" for k, v in cch.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def spawn(service: str, config: pathlib.Path, log: pathlib.Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """``agentctx serve SERVICE --config CONFIG`` with output to ``log``."""
    # The child writes to its own copy of the descriptor; ours can close at once.
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "agentctx_cli.main", "serve", service, "--config", str(config)],
            stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )


# A deadline for a service to come up that holds at the machine's worst load
# (starting a service imports grpc, protobuf and SQLAlchemy: seconds when
# both cores are busy); a healthy service returns at once.
HEALTHY_WITHIN_S = 180.0


def wait_healthy(port: int, certs: pathlib.Path, client: str, proc: subprocess.Popen,
                 timeout: float = HEALTHY_WITHIN_S) -> None:
    creds = channel_credentials(certs / "ca.pem", certs / f"{client}.pem", certs / f"{client}.key")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service on port {port} exited with {proc.returncode}")
        with grpc.secure_channel(
            f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "localhost")]
        ) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
        time.sleep(0.1)
    raise RuntimeError(f"service on port {port} did not become healthy")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
