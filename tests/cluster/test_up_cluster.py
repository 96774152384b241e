"""``agentctx up --cluster`` as a newcomer runs it: two context replicas on
a PostgreSQL database it creates and migrates, three cache replicas on
Redis, the demo across them, and every replica stopped at the end; the
cluster's keys are generated once and kept by the next start."""

from __future__ import annotations

import hashlib
import os
import pathlib
import socket
import subprocess
import sys
import tomllib
import uuid

import pytest

from agentctx_cli.pair import CLUSTER_PORT_STEP
from tests.cluster import support
from tests.support import postgres
from tests.support.processes import free_port

pytestmark = pytest.mark.redis


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _bases() -> tuple[int, int]:
    """Two base ports whose replica ports (base + 100 * i) are all free."""
    while True:
        context, cache = free_port(), free_port()
        ports = [b + i * CLUSTER_PORT_STEP for b in (context, cache) for i in range(3)]
        if max(ports) < 65536 and len(set(ports)) == len(ports) and not any(_listening(p) for p in ports):
            return context, cache


def _up(home: pathlib.Path, context: int, cache: int, database: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentctx_cli.main", "up", "--cluster", "--home", str(home),
                           "--context-port", str(context), "--cache-port", str(cache), "--cluster-database", database,
                           "--redis-url", support.REDIS_URL, "--exit-when-ready", *extra],
                          capture_output=True, text=True, timeout=240)


def test_up_cluster_runs_the_demo_across_the_replicas_and_stops_them(tmp_path: pathlib.Path) -> None:
    if not support.available() or not postgres.available():
        if os.environ.get("AGENTCTX_REQUIRE_REDIS") or os.environ.get("AGENTCTX_REQUIRE_POSTGRES"):
            pytest.fail("Redis and PostgreSQL are required but not reachable")
        pytest.skip("Redis or PostgreSQL is not reachable")
    home = (tmp_path / "home").resolve()
    database = f"agentctx_up_{uuid.uuid4().hex[:8]}"
    context, cache = _bases()
    tag = hashlib.sha256(str(home).encode()).hexdigest()[:8]
    try:
        done = _up(home, context, cache, database, "--demo-turns", "4")
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.index("agentctx is up as a cluster") < out.index("Summary: 4 model calls") < out.index("stopped every replica")
        for i in range(3):
            assert (home / "logs" / f"cache-{i}.log").exists()
        assert (home / "logs" / "context-1.log").exists()
        ports = [b + i * CLUSTER_PORT_STEP for b in (context, cache) for i in range(3)]
        assert not any(_listening(p) for p in ports)
        first = tomllib.loads((home / "agentctx-cluster.toml").read_text())["cache"]
        assert first["local_shared_state"] is True and first["redis_url"]
        again = _up(home, context, cache, database, "--no-demo")
        assert again.returncode == 0, again.stderr
        second = tomllib.loads((home / "agentctx-cluster.toml").read_text())["cache"]
        assert second["redis_encryption_key"] == first["redis_encryption_key"]
        assert second["lease_keys"] == first["lease_keys"]
    finally:
        postgres.drop_database(database)
        support.delete_prefix(f"agentctx-up-{tag}:")
        support.delete_prefix(f"agentctx-up-{tag}-sim:")
