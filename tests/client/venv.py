"""A virtual environment that holds only agentctx-client and its
dependencies (pinned by the root constraints.txt), built once under
.venv-client/<hash of clients/python/pyproject.toml and constraints.txt>
and reused; the client itself is reinstalled whenever its sources (or the
generated stubs) change."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
CONSTRAINTS = ROOT / "constraints.txt"
VENVS = ROOT / ".venv-client"
_SKIP = {"build", "__pycache__"}


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def _sources() -> str:
    """Hash of what a wheel of clients/python holds (the symlinked stubs too)."""
    files = []
    for dirpath, dirnames, filenames in os.walk(CLIENT, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            path = pathlib.Path(dirpath) / name
            if path.suffix != ".pyc":
                files += [str(path.relative_to(CLIENT)).encode(), path.read_bytes()]
    return _digest(*files)


def _pip(python: pathlib.Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                   check=True, env=env, timeout=600, capture_output=True)


def client_python() -> pathlib.Path:
    """The python of the client-only venv, built or refreshed as needed."""
    key = _digest((CLIENT / "pyproject.toml").read_bytes(), CONSTRAINTS.read_bytes())
    venv = VENVS / key
    python = venv / "bin" / "python"
    VENVS.mkdir(exist_ok=True)
    with open(VENVS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready, stamp = venv / ".deps-installed", venv / ".client-sources"
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            _pip(python, "-c", str(CONSTRAINTS), str(CLIENT))
            ready.touch()
            stamp.write_text(_sources())
        sources = _sources()
        if stamp.read_text() != sources:
            _pip(python, "--no-deps", "--force-reinstall", str(CLIENT))
            stamp.write_text(sources)
        for stale in VENVS.iterdir():
            if stale.is_dir() and stale.name != key:
                shutil.rmtree(stale, ignore_errors=True)
    return python
