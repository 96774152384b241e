"""Diagnostics end to end through real processes: both services as
`agentctx serve` subprocesses, a conversation through Generate, then the
CLI (also a subprocess) inspecting the session and invalidating its cache
scope with a wrong and with the right confirmation."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import processes


@pytest.fixture
def running_pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[int]:
    context_port, cache_port = processes.free_port(), processes.free_port()
    config = processes.write_config(tmp_path / "agentctx.toml", certs_dir, context_port=context_port,
                                    cache_port=cache_port, data_dir=tmp_path / "data",
                                    context={"require_client_cert": True})
    cache = processes.spawn("cache", config, tmp_path / "cache.log")
    context = processes.spawn("context", config, tmp_path / "context.log")
    try:
        processes.wait_healthy(cache_port, certs_dir, "context-client", cache)
        processes.wait_healthy(context_port, certs_dir, "agent-client", context)
        yield context_port
    finally:
        processes.stop(context)
        processes.stop(cache)
    for log in ("cache.log", "context.log"):
        text = (tmp_path / log).read_text()
        for forbidden in ("cachedContents/", "sk-demo-", "Checkout requests time out"):
            assert forbidden not in text, (log, forbidden)


def _cli(port: int, certs: pathlib.Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentctx_cli.main", *argv, "--target", f"127.0.0.1:{port}",
         "--certs", str(certs), "--timeout", "10"],
        capture_output=True, text=True, timeout=60,
    )


def _lifecycle(port: int, certs: pathlib.Path, session: str) -> dict[str, object]:
    done = _cli(port, certs, "inspect", "context-lifecycle", "demo", "newcomer", session, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_inspect_and_confirmed_invalidation_through_real_processes(running_pair: int, certs_dir: pathlib.Path) -> None:
    port = running_pair
    demo = subprocess.run(
        [sys.executable, "-m", "agentctx_cli.main", "demo", "--target", f"127.0.0.1:{port}",
         "--certs", str(certs_dir), "--turns", "5"],
        capture_output=True, text=True, timeout=60,
    )
    assert demo.returncode == 0, demo.stderr
    session = " ".join(demo.stdout.split()).split("inspect context-lifecycle \\ demo newcomer ")[1].split()[0]
    view = _lifecycle(port, certs_dir, session)
    assert view["cache_entry_count"] == "1" and view["event_count"] == "10"
    assert view["latest_cache"]["scope_fingerprint"] == view["scope_fingerprint"]
    readable = _cli(port, certs_dir, "inspect", "context-lifecycle", "demo", "newcomer", session)
    assert readable.returncode == 0 and "1 live, 0 being created" in readable.stdout

    confirm = {"app": "demo", "user": "newcomer", "session": session, "model": view["model"],
               "scope_fingerprint": view["scope_fingerprint"]}
    wrong = _cli(port, certs_dir, "context-cache", "invalidate", "demo", "newcomer", session,
                 "--confirm-json", json.dumps({**confirm, "session": "someone-else"}))
    assert wrong.returncode == 1 and "INVALIDATION_CONFIRMATION_MISMATCH" in wrong.stderr and "session" in wrong.stderr
    assert _lifecycle(port, certs_dir, session)["cache_entry_count"] == "1"

    right = _cli(port, certs_dir, "context-cache", "invalidate", "demo", "newcomer", session,
                 "--model", str(view["model"]), "--confirm-json", json.dumps(confirm), "--json")
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["entries_removed"] == "1"
    assert _lifecycle(port, certs_dir, session)["cache_entry_count"] == "0"


def test_inspect_against_the_cache_services_port_says_whose_port_it_is(certs_dir: pathlib.Path,
                                                                       tmp_path: pathlib.Path) -> None:
    cache_port = processes.free_port()
    config = processes.write_config(tmp_path / "agentctx.toml", certs_dir, context_port=processes.free_port(),
                                    cache_port=cache_port, data_dir=tmp_path / "data")
    cache = processes.spawn("cache", config, tmp_path / "cache.log")
    try:
        processes.wait_healthy(cache_port, certs_dir, "context-client", cache)
        for argv in (("inspect", "context-lifecycle", "demo", "u", "s"),
                     ("context-cache", "invalidate", "demo", "u", "s", "--model", "m", "--confirm-json", "{}")):
            done = _cli(cache_port, certs_dir, *argv)
            # Not gRPC's "UNIMPLEMENTED: Method not found!": whose port it is.
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
            assert f"127.0.0.1:{cache_port} is the cache service's port, not the context service's" in done.stderr
    finally:
        processes.stop(cache)
