"""``agentctx up --cluster`` as a newcomer runs it: two context replicas on
a PostgreSQL database it creates and migrates, three cache replicas on
Redis, the demo across them, and every replica stopped at the end; the
cluster's keys are generated once and kept by the next start. Each
service's replicas get a config file with only their own table: the
context side never holds the Redis URL or the cache tier's keys, in a file
or in its environment; and every file is private, also under umask 000."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tomllib
import uuid

import pytest

from agentctx_cli.pair import CLUSTER_PORT_STEP, Cluster, prepare_cluster_home
from tests.cluster import support
from tests.foundation.test_file_permissions import wrong_modes
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


def _command(home: pathlib.Path, context: int, cache: int, database: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "agentctx_cli.main", "up", "--cluster", "--home", str(home),
            "--context-port", str(context), "--cache-port", str(cache), "--cluster-database", database,
            "--redis-url", support.REDIS_URL, *extra]


def _up(home: pathlib.Path, context: int, cache: int, database: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(home, context, cache, database, "--exit-when-ready", *extra),
                          capture_output=True, text=True, timeout=240)


def assert_context_side_holds_no_cache_secret(home: pathlib.Path, secrets: tuple[str, ...], pids: list[int]) -> None:
    """The context replicas' config file has no [cache] table and none of
    the cache tier's secrets (the Redis URL, the encryption key, the lease
    secret), nor has any running context replica's environment; the one
    file of older versions, both tables in it, is gone."""
    config = home / "agentctx-cluster-context.toml"
    text = config.read_text()
    assert set(tomllib.loads(text)) == {"context"}
    assert not [s for s in secrets if s in text]
    assert not (home / "agentctx-cluster.toml").exists()
    for pid in pids:
        argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"--config") + 1].decode() == str(config)
        environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes()
        assert not [s for s in secrets if s.encode() in environ], f"context replica {pid}'s environment"
        assert b"AGENTCTX_CACHE_" not in environ


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
        first = tomllib.loads((home / "agentctx-cluster-cache.toml").read_text())["cache"]
        assert first["local_shared_state"] is True and first["redis_url"]
        secrets = (support.REDIS_URL, first["redis_encryption_key"], first["lease_keys"][0]["secret"])
        assert_context_side_holds_no_cache_secret(home, secrets, [])
        # Again under umask 000 and with the cache tier's settings in the
        # environment as an operator might export them: still only the cache
        # replicas get them, and every file is private.
        environ = {**os.environ, "AGENTCTX_CACHE_REDIS_URL": support.REDIS_URL,
                   "AGENTCTX_CACHE_REDIS_ENCRYPTION_KEY": first["redis_encryption_key"]}
        running = subprocess.Popen(_command(home, context, cache, database, "--no-demo"), env=environ,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: os.umask(0))
        try:
            assert running.stdout is not None
            for line in running.stdout:
                if line.startswith("Ctrl-C stops"):
                    break
            else:
                pytest.fail(f"up --cluster did not come up: {running.wait(30)} {running.stderr.read() if running.stderr else ''}")
            replicas = json.loads((home / "pair.json").read_text())["service_pids"]
            contexts = [pid for pid in replicas if b"serve\0context" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()]
            assert len(contexts) == 2
            assert_context_side_holds_no_cache_secret(home, secrets, contexts)
            assert wrong_modes(home) == {}
        finally:
            running.send_signal(signal.SIGTERM)
            assert running.wait(60) == 0
        second = tomllib.loads((home / "agentctx-cluster-cache.toml").read_text())["cache"]
        assert second["redis_encryption_key"] == first["redis_encryption_key"]
        assert second["lease_keys"] == first["lease_keys"]
        assert not any(_listening(p) for p in ports)
    finally:
        postgres.drop_database(database)
        support.delete_prefix(f"agentctx-up-{tag}:")
        support.delete_prefix(f"agentctx-up-{tag}-sim:")


def test_a_home_of_the_one_file_keeps_its_keys_and_loses_the_file(tmp_path: pathlib.Path) -> None:
    """A home ``up --cluster`` ran from before, both tables in
    agentctx-cluster.toml (0644): its keys move to the cache replicas' file,
    so the leases and stored names stay readable, and the old file goes."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)  # the user's: an existing home is left as it is
    legacy = home / "agentctx-cluster.toml"
    legacy.write_text('[context]\nport = 1\n\n[cache]\nredis_encryption_key = "a2V5"\n'
                      'lease_keys = [{ id = "old", secret = "s3cret" }]\n')
    legacy.chmod(0o644)
    configs = prepare_cluster_home(Cluster(home=home, context_port=51000, cache_port=52000))
    cache = tomllib.loads(configs.cache.read_text())["cache"]
    assert cache["redis_encryption_key"] == "a2V5" and cache["lease_keys"] == [{"id": "old", "secret": "s3cret"}]
    assert not legacy.exists()
    assert "s3cret" not in configs.context.read_text() and "a2V5" not in configs.context.read_text()
    assert wrong_modes(home) == {}


def test_the_context_replicas_share_one_tool_token_key_across_restarts(tmp_path: pathlib.Path) -> None:
    """Tokens minted on one context replica verify on the other, and after
    a restart: one key in the context replicas' file, kept, never in the
    cache replicas' file."""
    cluster = Cluster(home=tmp_path / "home", context_port=51000, cache_port=52000)
    first = prepare_cluster_home(cluster)
    keys = tomllib.loads(first.context.read_text())["context"]["tool_token_keys"]
    again = prepare_cluster_home(cluster)
    assert tomllib.loads(again.context.read_text())["context"]["tool_token_keys"] == keys
    assert len(keys) == 1 and len(keys[0]["secret"]) == 64
    assert keys[0]["secret"] not in again.cache.read_text()
    assert wrong_modes(cluster.home) == {}
