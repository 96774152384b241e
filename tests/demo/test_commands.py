"""`agentctx demo` and `agentctx up` as a newcomer runs them: real
processes, a fresh home directory, free loopback ports."""

from __future__ import annotations

import pathlib
import socket
import subprocess
import sys

from tests.support.processes import free_port


def _agentctx(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentctx_cli.main", *argv],
                          capture_output=True, text=True, timeout=timeout)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_demo_starts_a_pair_when_none_answers_and_stops_it_after(tmp_path: pathlib.Path) -> None:
    context_port, cache_port = free_port(), free_port()
    done = _agentctx("demo", "--home", str(tmp_path / "home"), "--context-port", str(context_port),
                     "--cache-port", str(cache_port), "--turns", "6")
    assert done.returncode == 0, done.stderr
    assert "starting one from" in done.stdout and "Stopped the services started for the demo" in done.stdout
    assert "Summary: 6 model calls" in done.stdout
    assert not _listening(context_port) and not _listening(cache_port)
    assert (tmp_path / "home" / "logs" / "context.log").exists()


def test_demo_without_a_pair_and_without_starting_one_is_one_line(tmp_path: pathlib.Path) -> None:
    done = _agentctx("demo", "--home", str(tmp_path), "--context-port", str(free_port()), "--no-start")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no context service answers" in done.stderr


def test_up_runs_the_demo_once_the_pair_is_healthy(tmp_path: pathlib.Path) -> None:
    context_port, cache_port = free_port(), free_port()
    done = _agentctx("up", "--home", str(tmp_path / "home"), "--context-port", str(context_port),
                     "--cache-port", str(cache_port), "--exit-when-ready", "--demo-turns", "4")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("agentctx is up") < out.index("Summary: 4 model calls") < out.index("Try them with grpcurl")
    assert "stopped both services" in out
    skipped = _agentctx("up", "--home", str(tmp_path / "home"), "--context-port", str(context_port),
                        "--cache-port", str(cache_port), "--exit-when-ready", "--no-demo")
    assert skipped.returncode == 0 and "Summary" not in skipped.stdout


def test_up_refuses_a_demo_of_no_calls_before_starting_anything(tmp_path: pathlib.Path) -> None:
    for argv in (["up", "--demo-turns", "0"], ["demo", "--turns", "0"]):
        done = _agentctx(*argv, "--home", str(tmp_path / "home"), "--context-port", str(free_port()))
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "must be at least 1, not 0" in done.stderr, done.stderr
    assert not (tmp_path / "home").exists()


def test_up_writes_the_config_once_and_later_starts_say_what_they_override(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    context_port, cache_port = free_port(), free_port()
    first = _agentctx("up", "--home", str(home), "--context-port", str(context_port), "--cache-port", str(cache_port),
                      "--exit-when-ready", "--no-demo")
    assert first.returncode == 0, first.stderr
    config = home / "agentctx.toml"
    assert f"wrote {config}" in first.stdout
    # A user's edit survives the next start, which takes its ports from the file.
    edited = config.read_text().replace("[cache]\n", "[cache]\ndefault_ttl_s = 600\n")
    config.write_text(edited)
    again = _agentctx("up", "--home", str(home), "--exit-when-ready", "--no-demo")
    assert again.returncode == 0, again.stderr
    assert f"read {config}" in again.stdout and "overridden" not in again.stdout
    assert f"context service on 127.0.0.1:{context_port}" in again.stdout
    assert config.read_text() == edited
    # A port given on the command line wins, and the start says so.
    other = free_port()
    moved = _agentctx("up", "--home", str(home), "--context-port", str(other), "--exit-when-ready", "--no-demo")
    assert moved.returncode == 0, moved.stderr
    assert f"[context] port = {context_port} overridden by the command: {other}" in moved.stdout
    assert f"context service on 127.0.0.1:{other}" in moved.stdout
    assert config.read_text() == edited
    init = _agentctx("init", "--home", str(home))
    assert init.returncode == 0 and f"kept {config}" in init.stdout
    assert config.read_text() == edited


def test_a_service_that_fails_to_start_shows_its_cause_and_log(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    assert _agentctx("init", "--home", str(home)).returncode == 0
    config = home / "agentctx.toml"
    config.write_text(config.read_text().replace("[cache]\n", "[cache]\ndefualt_ttl_s = 600\n"))
    done = _agentctx("up", "--home", str(home), "--context-port", str(free_port()), "--cache-port", str(free_port()),
                     "--exit-when-ready", "--no-demo")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "the cache service on port" in done.stderr and "exited with status 2" in done.stderr
    assert "'defualt_ttl_s' is not a setting (did you mean 'default_ttl_s'?)" in done.stderr
    assert f"(log: {home.resolve() / 'logs' / 'cache.log'})" in done.stderr
