"""The ADK virtual environment: google-adk 2.x needs google-genai below 3,
the cache service 3.x, so ADK runs in a venv of its own holding
agentctx-adk, agentctx-client and their test extras (pinned by
clients/adk/constraints.txt). Built once under
.venv-adk/<hash of clients/adk/pyproject.toml and its constraints.txt> and
reused; the two clients are reinstalled whenever their sources change."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADK = ROOT / "clients" / "adk"
CLIENT = ROOT / "clients" / "python"
CONSTRAINTS = ADK / "constraints.txt"
VENVS = ROOT / ".venv-adk"
_SKIP = {"build", "__pycache__"}


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def _sources() -> str:
    """Hash of what the wheels of both clients hold (the symlinked stubs too)."""
    files = []
    for top in (CLIENT, ADK):
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.endswith(".egg-info"))
            for name in sorted(filenames):
                path = pathlib.Path(dirpath) / name
                if path.suffix != ".pyc":
                    files += [str(path.relative_to(ROOT)).encode(), path.read_bytes()]
    return _digest(*files)


def _pip(python: pathlib.Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                   check=True, env=env, timeout=900, capture_output=True)


def adk_python() -> pathlib.Path:
    """The python of the ADK venv, built or refreshed as needed."""
    key = _digest((ADK / "pyproject.toml").read_bytes(), CONSTRAINTS.read_bytes())
    venv = VENVS / key
    python = venv / "bin" / "python"
    VENVS.mkdir(exist_ok=True)
    with open(VENVS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready, stamp = venv / ".deps-installed", venv / ".client-sources"
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            _pip(python, "-c", str(CONSTRAINTS), str(CLIENT), f"{ADK}[test]")
            ready.touch()
            stamp.write_text(_sources())
        sources = _sources()
        if stamp.read_text() != sources:
            _pip(python, "--no-deps", "--force-reinstall", str(CLIENT), str(ADK))
            stamp.write_text(sources)
        for stale in VENVS.iterdir():
            if stale.is_dir() and stale.name != key:
                shutil.rmtree(stale, ignore_errors=True)
    return python


if __name__ == "__main__":
    print(adk_python())
