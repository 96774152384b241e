"""Every ``sh`` block of the README runs as written from a fresh clone (a
directory with only the venv ``make venv`` builds): the Configuration block
starts a pair, the grpcurl walkthrough and the Diagnostics block run against
it, and the Gemini block starts a cache service. Only the ports change (to
free ones, through the environment variables the README documents), so that
the test can run beside other pairs. A block this test does not know fails
it: run the new block here, or say below why it is not run."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support.processes import free_port, wait_healthy

ROOT = pathlib.Path(__file__).parents[2]

# Blocks run elsewhere or not at all, and why.
NOT_RUN = {
    "make": "`make up` is `make venv` plus `agentctx up` (tests/demo); `make test` is this suite",
    "bench": "the benchmarks take minutes each and are run by hand (bench/)",
}


def _blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def _kind(block: str) -> str:
    if "$G" in block or "$C" in block:
        return "grpcurl"
    if block.startswith("make "):
        return "make"
    if "-m bench." in block:
        return "bench"
    if "GEMINI_API_KEY=" in block:
        return "gemini"
    if "agentctx inspect" in block or "agentctx context-cache" in block:
        return "diagnostics"
    if "agentctx serve context" in block:
        return "configuration"
    return "unknown"


def _only(kind: str) -> str:
    blocks = [b for b in _blocks() if _kind(b) == kind]
    assert len(blocks) == 1, f"one {kind} block expected, found {len(blocks)}"
    return blocks[0]


def test_every_block_is_run_or_says_why_not() -> None:
    kinds = [_kind(b) for b in _blocks()]
    assert "unknown" not in kinds, [b for b in _blocks() if _kind(b) == "unknown"]
    assert set(kinds) - set(NOT_RUN) == {"grpcurl", "configuration", "diagnostics", "gemini"}


@pytest.fixture
def clone(tmp_path: pathlib.Path) -> pathlib.Path:
    """A fresh clone after `make venv`, as far as the blocks can tell."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    return tmp_path


def _start(script: str, clone: pathlib.Path, env: dict[str, str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    (clone / "block.sh").write_text(script)
    with open(log, "ab") as out:
        # Its own process group, so that the background job stops with it.
        return subprocess.Popen(["bash", "block.sh"], cwd=clone, env={**os.environ, **env}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the background job, too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("a process of the block outlived SIGTERM")


def _wait_for(path: pathlib.Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"{path.name} was not written"
        time.sleep(0.05)


@pytest.fixture
def ports() -> Iterator[dict[str, int]]:
    yield {"context": free_port(), "cache": free_port()}


def _run(script: str, clone: pathlib.Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=clone, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_configuration_walkthrough_and_diagnostics_run_as_written(clone: pathlib.Path, ports: dict[str, int]) -> None:
    env = {"AGENTCTX_CONTEXT_PORT": str(ports["context"]), "AGENTCTX_CACHE_PORT": str(ports["cache"]),
           "AGENTCTX_CONTEXT_CACHE_TARGET": f"127.0.0.1:{ports['cache']}",
           "AGENTCTX_TARGET": f"127.0.0.1:{ports['context']}"}
    log = clone.parent / f"{clone.name}-configuration.log"
    pair = _start(_only("configuration"), clone, env, log)
    try:
        certs = clone / ".agentctx" / "certs"
        _wait_for(clone / ".agentctx" / "agentctx.toml", pair)  # written after the certificates
        wait_healthy(ports["cache"], certs, "context-client", pair)
        wait_healthy(ports["context"], certs, "agent-client", pair)

        walkthrough = "\n".join(b for b in _blocks() if _kind(b) == "grpcurl")
        walkthrough = (walkthrough.replace("127.0.0.1:50051", f"127.0.0.1:{ports['context']}")
                       .replace("127.0.0.1:50052", f"127.0.0.1:{ports['cache']}"))
        ran = _run(walkthrough, clone, env)
        assert (ran.stdout + ran.stderr).count("ERROR:") == 1, ran.stdout + ran.stderr  # the stale etag, shown

        diagnostics = _run("G=unused\n" + _only("diagnostics"), clone, env)
        out = diagnostics.stdout
        assert "Context lifecycle of apps/travel/users/alice/sessions/trip-1" in out, diagnostics.stderr
        view = json.loads(out[out.index("\n{") + 1: out.rindex("}") + 1])
        assert view["session"] == "apps/travel/users/alice/sessions/trip-1"
        # The confirmation's fingerprint is the placeholder the text explains:
        # refused, in one line, and nothing changes.
        assert diagnostics.returncode == 1
        assert "INVALIDATION_CONFIRMATION_MISMATCH" in diagnostics.stderr and "scope_fingerprint" in diagnostics.stderr
    finally:
        _stop_group(pair)
    text = log.read_text()
    assert "Traceback" not in text and "database schema upgraded from empty" in text, text
    # Nothing outside the git-ignored home that `make clean` removes.
    assert sorted(p.name for p in clone.iterdir()) == [".agentctx", ".venv", "block.sh"]
    assert ".agentctx/" in (ROOT / ".gitignore").read_text().split()
    assert re.search(r"^clean:\n\trm -rf .*\.agentctx", (ROOT / "Makefile").read_text(), flags=re.M)


@pytest.mark.slow
def test_the_gemini_block_starts_a_cache_service(clone: pathlib.Path, ports: dict[str, int]) -> None:
    assert _run(".venv/bin/agentctx init", clone, {}).returncode == 0
    env = {"AGENTCTX_CACHE_PORT": str(ports["cache"])}
    log = clone.parent / f"{clone.name}-gemini.log"
    cache = _start(_only("gemini"), clone, env, log)
    try:
        wait_healthy(ports["cache"], clone / ".agentctx" / "certs", "context-client", cache)
    finally:
        _stop_group(cache)
    assert "Traceback" not in log.read_text()
