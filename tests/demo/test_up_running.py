"""`agentctx up` while it runs, as a person at a terminal has it: each
service sees only its own environment, a second `up` on the same ports is
refused at once and changes nothing, and Ctrl-C (SIGINT to the whole
process group, as a terminal sends it) stops everything without a
traceback in the logs."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.processes import free_port

GEMINI_KEY = "AIza-not-a-real-key-for-this-test"
VENDOR_KEYS = {"ANTHROPIC_API_KEY": "sk-ant-not-a-real-key", "OPENAI_API_KEY": "sk-not-a-real-openai-key",
               "VLLM_API_KEY": "not-a-real-vllm-key"}
# A route naming its own key variable, as the README's vLLM example does.
ROUTES = ('[{"pattern": "qwen*", "provider": "openai", "name": "vllm", '
          '"base_url": "http://127.0.0.1:9/v1", "api_key_env": "VLLM_API_KEY"}]')


@dataclass
class Running:
    proc: subprocess.Popen[str]
    home: pathlib.Path
    context_port: int
    cache_port: int
    stdout: list[str]


def _agentctx(*argv: str) -> list[str]:
    return [sys.executable, "-m", "agentctx_cli.main", *argv]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    home = tmp_path_factory.mktemp("up") / "home"
    context_port, cache_port = free_port(), free_port()
    env = {**os.environ, "AGENTCTX_CACHE_GEMINI_API_KEY": GEMINI_KEY, "GEMINI_API_KEY": GEMINI_KEY,
           **VENDOR_KEYS, "AGENTCTX_CACHE_ROUTES": ROUTES,
           "AGENTCTX_CONTEXT_LOG_LEVEL": "INFO", "UNRELATED_SECRET_TOKEN": "hunter2"}
    # Its own process group, as a shell gives a foreground job: SIGINT to the
    # group is what Ctrl-C does.
    proc = subprocess.Popen(
        _agentctx("up", "--home", str(home), "--context-port", str(context_port), "--cache-port", str(cache_port),
                  "--demo-turns", "30"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C stops both."):
            break
    else:
        proc.wait(timeout=30)
        pytest.fail("agentctx up did not come up:\n" + "".join(lines))
    running = Running(proc, home, context_port, cache_port, lines)
    try:
        yield running
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def _environ(pid: int) -> dict[str, str]:
    raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def _service_pids(home: pathlib.Path) -> dict[str, int]:
    cache, context = json.loads((home / "pair.json").read_text())["service_pids"]
    return {"cache": cache, "context": context}


@pytest.mark.slow
def test_each_service_gets_only_its_own_environment(running: Running) -> None:
    pids = _service_pids(running.home)
    context, cache = _environ(pids["context"]), _environ(pids["cache"])
    assert GEMINI_KEY not in "".join(context.values())
    assert not any(k.startswith("AGENTCTX_CACHE_") for k in context)
    assert context["AGENTCTX_CONTEXT_LOG_LEVEL"] == "INFO" and "PATH" in context
    assert cache["AGENTCTX_CACHE_GEMINI_API_KEY"] == GEMINI_KEY and cache["GEMINI_API_KEY"] == GEMINI_KEY
    # Every key the README and the routes name reaches the cache service, and only it.
    for name, value in VENDOR_KEYS.items():
        assert cache[name] == value, name
        assert name not in context and value not in "".join(context.values()), name
    assert not any(k.startswith("AGENTCTX_CONTEXT_") for k in cache)
    assert "UNRELATED_SECRET_TOKEN" not in context and "UNRELATED_SECRET_TOKEN" not in cache


@pytest.mark.slow
def test_a_second_up_on_the_same_ports_is_refused_and_changes_nothing(running: Running,
                                                                      tmp_path: pathlib.Path) -> None:
    files = {p: p.read_bytes() for p in running.home.rglob("*") if p.is_file() and p.parent.name != "logs"}
    logs = {p: p.stat().st_size for p in (running.home / "logs").iterdir()}
    for home in (running.home, tmp_path / "elsewhere"):
        second = subprocess.run(
            _agentctx("up", "--home", str(home), "--context-port", str(running.context_port),
                      "--cache-port", str(running.cache_port), "--exit-when-ready"),
            capture_output=True, text=True, timeout=60,
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert "agentctx is up" not in second.stdout and "Summary" not in second.stdout
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert f"{running.context_port} (context), {running.cache_port} (cache) already in use" in second.stderr
        assert str(running.proc.pid if home == running.home else _service_pids(running.home)["context"]) \
            in second.stderr
    assert not (tmp_path / "elsewhere").exists()
    assert {p: p.read_bytes() for p in running.home.rglob("*") if p.is_file() and p.parent.name != "logs"} == files
    assert {p: p.stat().st_size for p in (running.home / "logs").iterdir()} == logs
    assert running.proc.poll() is None


@pytest.mark.slow
def test_ctrl_c_stops_both_without_a_traceback(running: Running) -> None:
    # The demo (30 calls) compacted, so the extractive compactor's worker
    # process is running too.
    assert re.search(r"Summary: .*, [1-9]\d* compactions? \(", "".join(running.stdout))
    os.killpg(running.proc.pid, signal.SIGINT)
    rest, _ = running.proc.communicate(timeout=60)
    assert running.proc.returncode == 0, rest
    assert "stopped both services" in rest
    for log in ("context.log", "cache.log"):
        text = (running.home / "logs" / log).read_text()
        text = _without_grpc_cancellations(text)
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, (log, text[-3000:])
    assert not (running.home / "pair.json").exists()


def _without_grpc_cancellations(text: str) -> str:
    """gRPC's own report of an RPC cancelled while both services stop at
    once (its C core prints it from ``_schedule_rpc_coro``, outside any
    logger): not a traceback of ours, so it is left out of the check."""
    frames = r"(?:[ \t]+.*\n)*?"
    return re.sub(rf"Traceback \(most recent call last\):\n{frames}[ \t]+File .*_schedule_rpc_coro\n"
                  rf"{frames}asyncio\.exceptions\.CancelledError\n?", "", text)


@pytest.mark.slow
def test_ctrl_c_of_make_up_leaves_no_leaked_semaphores(tmp_path: pathlib.Path) -> None:
    # As `make up` runs it: make, then `agentctx up` with the demo, whose
    # compactions start the extractive compactor's process pool (its queues
    # hold five semaphores registered with multiprocessing's resource
    # tracker). When Ctrl-C reached the services too, the context service
    # died before its finalizers ran and the tracker reported "5 leaked
    # semaphore objects" in context.log; the services now run in their own
    # sessions and `up` alone stops them.
    home = tmp_path / "home"
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"up:\n\t{sys.executable} -m agentctx_cli.main up --home {home} "
                        f"--context-port {free_port()} --cache-port {free_port()} --demo-turns 30\n")
    proc = subprocess.Popen(["make", "--no-print-directory", "-f", str(makefile), "up"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C stops both."):
            break
    else:
        pytest.fail("make up did not come up:\n" + "".join(lines))
    assert re.search(r"Summary: .*, [1-9]\d* compactions? \(", "".join(lines))
    os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert "stopped both services" in rest
    deadline = time.monotonic() + 10  # the tracker writes its report as it exits
    while time.monotonic() < deadline and (home / "pair.json").exists():
        time.sleep(0.1)
    time.sleep(1)
    for log in ("context.log", "cache.log"):
        text = (home / "logs" / log).read_text()
        assert "leaked" not in text and "resource_tracker" not in text, (log, text[-3000:])
