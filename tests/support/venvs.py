"""Virtual environments the suite builds once and reuses: a folder per hash
of what determines the dependencies, under ``root``; the packages under
test are reinstalled (without their dependencies) whenever their sources
change. Concurrent test processes take a file lock."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Sequence

_SKIP = {"build", "__pycache__"}


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def sources_digest(tops: Sequence[pathlib.Path], relative_to: pathlib.Path) -> str:
    """Hash of what wheels of ``tops`` hold (symlinked folders followed)."""
    files = []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.endswith(".egg-info"))
            for name in sorted(filenames):
                path = pathlib.Path(dirpath) / name
                if path.suffix != ".pyc":
                    files += [str(path.relative_to(relative_to)).encode(), path.read_bytes()]
    return digest(*files)


def pip_install(python: pathlib.Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                   check=True, env=env, timeout=900, capture_output=True)


# How long building a venv may take on a loaded machine (pip resolves and
# installs tens of packages): the per-test timeout of a test that may build one.
VENV_BUILD_TIMEOUT_S = 2400


def venv_ready(root: pathlib.Path, *, key_files: Sequence[pathlib.Path], packages: Sequence[pathlib.Path]) -> bool:
    """Whether ``cached_venv`` with these arguments would return at once
    (built, and its packages installed from the current sources)."""
    venv = root / digest(*(path.read_bytes() for path in key_files))
    stamp = venv / ".sources"
    return ((venv / ".deps-installed").exists() and stamp.exists()
            and stamp.read_text() == sources_digest(packages, root.parent))


def cached_venv(
    root: pathlib.Path,
    *,
    key_files: Sequence[pathlib.Path],
    constraints: pathlib.Path,
    install: Sequence[str],
    packages: Sequence[pathlib.Path],
) -> pathlib.Path:
    """The python of a venv under ``root`` keyed by ``key_files``, holding
    ``install`` (pinned by ``constraints``); ``packages`` (source folders)
    are reinstalled when their sources change. Older venvs are removed."""
    key = digest(*(path.read_bytes() for path in key_files))
    venv = root / key
    python = venv / "bin" / "python"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready, stamp = venv / ".deps-installed", venv / ".sources"
        sources = sources_digest(packages, root.parent)
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            pip_install(python, "-c", str(constraints), *install)
            ready.touch()
            stamp.write_text(sources)
        if not stamp.exists() or stamp.read_text() != sources:
            pip_install(python, "--no-deps", "--force-reinstall", *(str(p) for p in packages))
            stamp.write_text(sources)
        for stale in root.iterdir():
            if stale.is_dir() and stale.name != key:
                shutil.rmtree(stale, ignore_errors=True)
    return python
