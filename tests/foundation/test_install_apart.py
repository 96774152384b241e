"""Each service installs and runs alone: a fresh venv with only the context
service's extra has no provider SDK, one with only the cache service's has
no database driver, and each starts and answers health checks.

The venvs live under .venv-apart/<service>/<hash of the install inputs>,
built once and reused (editable installs, so they follow the sources)."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from tests.support.processes import free_port, stop, wait_healthy, write_config
from tests.support.venvs import VENV_BUILD_TIMEOUT_S, cached_venv

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENVS = ROOT / ".venv-apart"
INPUTS = (ROOT / "pyproject.toml", ROOT / "constraints.txt", ROOT / "clients" / "python" / "pyproject.toml")

# What each service must not bring: the other service's dependencies.
FORBIDDEN = {
    "context": ["google.genai", "anthropic", "openai"],
    "cache": ["sqlalchemy", "asyncpg", "aiosqlite", "alembic"],
}


def _venv(service: str) -> pathlib.Path:
    # Editable installs: the venv follows the sources, only dependencies are cached.
    return cached_venv(VENVS / service, key_files=INPUTS, constraints=ROOT / "constraints.txt",
                       install=["-e", str(ROOT / "clients" / "python"), "-e", f"{ROOT}[{service}]"], packages=[])


def _importable(python: pathlib.Path, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(python), "-I", "-c", probe], timeout=60).returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(VENV_BUILD_TIMEOUT_S)  # builds its venv the first time
@pytest.mark.parametrize(("service", "client"), [("context", "agent-client"), ("cache", "context-client")])
def test_a_service_installs_and_serves_alone(service: str, client: str, certs_dir: pathlib.Path,
                                             tmp_path: pathlib.Path) -> None:
    python = _venv(service)
    assert [m for m in FORBIDDEN[service] if _importable(python, m)] == []
    assert _importable(python, f"{service}_service.server")

    port = free_port()
    config = write_config(tmp_path / "agentctx.toml", certs_dir, context_port=port, cache_port=port,
                          data_dir=tmp_path / "data")
    with open(tmp_path / "service.log", "ab") as log:
        proc = subprocess.Popen(
            [str(python), "-m", "agentctx_cli.main", "serve", service, "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        )
    try:
        wait_healthy(port, certs_dir, client, proc)
    finally:
        code = stop(proc)
    assert code == 0, (tmp_path / "service.log").read_text()[-3000:]
