"""The context database holds event content, tool arguments and state
verbatim: its directory is 0700 and the database, WAL and SHM files 0600,
whatever the umask allows, as the cache journal is. What ``agentctx init``
and ``agentctx up`` create (config, keys, data, logs) is private too, also
under ``umask 000``; only the certificates are readable by others."""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import content_pb2, event_pb2
from tests.support.processes import free_port
from tests.support.servers import context_settings, secure_channel, start_context


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _append_one(port: int, certs: pathlib.Path) -> None:
    async with secure_channel(port, certs) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        session = await stub.CreateSession(pb.CreateSessionRequest(parent="apps/a/users/u"))
        content = content_pb2.Content(role="user", parts=[content_pb2.Part(text="tool args: api_key=x")])
        await stub.AppendEvent(pb.AppendEventRequest(parent=session.name, event=event_pb2.Event(
            author="user", content=content)))


@pytest.mark.parametrize("existing", [False, True])
async def test_context_database_is_private(certs_dir: pathlib.Path, tmp_path: pathlib.Path, existing: bool) -> None:
    data_dir = tmp_path / "context-data"
    with _umask(0o022):
        if existing:  # an empty database file made before: world-readable
            data_dir.mkdir(mode=0o700)
            (data_dir / "context.db").touch(mode=0o644)
        server = await start_context(context_settings(certs_dir, tmp_path, data_dir=data_dir))
        try:
            await _append_one(server.port, certs_dir)
            files = {p.name: _mode(p) for p in data_dir.iterdir()}
        finally:
            await server.stop(0)
    assert _mode(data_dir) == 0o700
    assert {"context.db", "context.db-wal", "context.db-shm"} <= set(files)
    assert all(mode == 0o600 for name, mode in files.items() if name.startswith("context.db")), files


async def test_existing_files_are_made_private(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """A database (and WAL and SHM files left by a crash) written before
    the fix, world-readable, is made private at the next start."""
    data_dir = tmp_path / "context-data"
    with _umask(0o022):
        first = await start_context(context_settings(certs_dir, tmp_path, data_dir=data_dir))
        await _append_one(first.port, certs_dir)
        await first.stop(0)
        for suffix in ("", "-wal", "-shm"):
            (data_dir / f"context.db{suffix}").touch()
            (data_dir / f"context.db{suffix}").chmod(0o644)
        second = await start_context(context_settings(certs_dir, tmp_path, data_dir=data_dir))
        try:
            modes = {p.name: _mode(p) for p in data_dir.iterdir() if p.name.startswith("context.db")}
            await _append_one(second.port, certs_dir)  # still a working database
        finally:
            await second.stop(0)
    assert modes == {"context.db": 0o600, "context.db-wal": 0o600, "context.db-shm": 0o600}


# --- what `agentctx init` and `agentctx up` create ------------------------------

def _cli(*args: str, umask: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentctx_cli.main", *args], capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: os.umask(umask))


def expected_mode(path: pathlib.Path) -> int:
    """Certificates 0644 in a 0755 certs/; every other file (config, keys,
    logs, journal, database) 0600 and every other directory 0700."""
    if path.is_dir():
        return 0o755 if path.name == "certs" else 0o700
    return 0o644 if path.suffix == ".pem" else 0o600


def wrong_modes(home: pathlib.Path) -> dict[str, str]:
    return {str(p.relative_to(home.parent)): oct(_mode(p)) for p in [home, *home.rglob("*")]
            if _mode(p) != expected_mode(p)}


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_init_makes_every_file_private_whatever_the_umask(tmp_path: pathlib.Path, umask: int) -> None:
    home = tmp_path / "home"
    done = _cli("init", "--home", str(home), "--context-port", str(free_port()), "--cache-port", str(free_port()),
                umask=umask)
    assert done.returncode == 0, done.stderr
    assert {"agentctx.toml", "certs", "data", "logs"} <= {p.name for p in home.iterdir()}
    assert wrong_modes(home) == {}


def test_init_tightens_a_home_written_by_an_older_version(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    assert _cli("init", "--home", str(home), umask=0o022).returncode == 0
    for path in (home / "data", home / "logs", home / "certs"):
        path.chmod(0o777)
    for path in (home / "agentctx.toml", home / "certs" / "ca.pem", home / "certs" / "ca.key"):
        path.chmod(0o666)
    (home / "logs" / "cache.log").touch()
    (home / "logs" / "cache.log").chmod(0o644)
    done = _cli("init", "--home", str(home), umask=0o022)
    assert done.returncode == 0, done.stderr
    assert "kept" in done.stdout  # the user's file, edits included: only its mode changed
    assert wrong_modes(home) == {"home/logs/cache.log": "0o644"}  # a log is made private when next opened


def test_up_makes_every_file_private_under_umask_000(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    context, cache = free_port(), free_port()
    done = _cli("up", "--home", str(home), "--context-port", str(context), "--cache-port", str(cache),
                "--exit-when-ready", "--demo-turns", "2", umask=0o000)
    assert done.returncode == 0, done.stderr
    made = {str(p.relative_to(home)) for p in home.rglob("*")}
    assert {"logs/context.log", "logs/cache.log", "data/context.db", "data/cache-journal.jsonl"} <= made, made
    assert wrong_modes(home) == {}


def test_up_refuses_a_shared_file_holding_cache_tier_secrets(tmp_path: pathlib.Path) -> None:
    """The pair's agentctx.toml goes to both services: one that sets the
    cache tier's secrets in [cache] is refused before anything starts,
    naming the settings and never their values."""
    home = tmp_path / "home"
    assert _cli("init", "--home", str(home), "--context-port", str(free_port()), "--cache-port", str(free_port()),
                umask=0o022).returncode == 0
    with open(home / "agentctx.toml", "a") as config:  # [cache] is the file's last table
        config.write('redis_encryption_key = "c2VjcmV0LXZhbHVl"\n')
    done = _cli("up", "--home", str(home), "--exit-when-ready", "--no-demo", umask=0o022)
    assert done.returncode != 0
    assert "redis_encryption_key" in done.stderr and "AGENTCTX_CACHE_REDIS_ENCRYPTION_KEY" in done.stderr
    assert "c2VjcmV0LXZhbHVl" not in done.stderr + done.stdout
    assert not (home / "logs" / "context.log").exists()


def test_serve_context_warns_of_a_file_holding_cache_tier_secrets(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "both.toml"
    config.write_text('[context]\nprot = 1\n\n[cache]\nredis_url = "redis://:pw@127.0.0.1:6379/0"\n')
    done = _cli("serve", "context", "--config", str(config), umask=0o022)
    assert done.returncode != 0  # the misspelt key stops it right after the warning
    assert "warning" in done.stderr and "redis_url" in done.stderr and "pw@" not in done.stderr
