"""ADK tests: code that imports google.adk runs in the ADK venv
(tests/adk/venv.py) as a subprocess, against a pair of services these
fixtures start in this process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest

from tests.adk.venv import ROOT, adk_python, adk_venv_ready
from tests.support.pair import ServicePair, start_pair
from tests.support.venvs import VENV_BUILD_TIMEOUT_S

# Small enough that a short conversation is worth caching.
PROTO_DIFF = pathlib.Path(__file__).parents[1] / "support" / "proto_diff.py"
CACHE_DEFAULTS = {"local_min_cache_tokens": 64, "min_prefix_tokens": 64}


@dataclass(frozen=True)
class AdkRun:
    returncode: int
    stdout: str
    stderr: str


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """While the ADK venv is not built (or its clients not reinstalled from
    the current sources), whichever ADK test comes first builds it, which
    takes minutes on a busy machine: every test of this folder then gets
    the build's timeout instead of the suite's."""
    here = pathlib.Path(__file__).parent
    mine = [item for item in items if here in item.path.parents]
    if mine and not adk_venv_ready():
        for item in mine:
            item.add_marker(pytest.mark.timeout(VENV_BUILD_TIMEOUT_S))


@pytest.fixture(scope="session")
def adk_venv_python() -> pathlib.Path:
    return adk_python()


@pytest.fixture
async def adk_pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    pair = await start_pair(certs_dir, tmp_path / "pair", cache=CACHE_DEFAULTS)
    try:
        yield pair
    finally:
        await pair.close()


def pair_env(pair: ServicePair) -> dict[str, str]:
    """How code in the ADK venv reaches the pair's context service."""
    return {
        "AGENTCTX_ADK_TARGET": f"127.0.0.1:{pair.context_port}",
        "AGENTCTX_ADK_CA": str(pair.certs / "ca.pem"),
    }


async def run_adk(python: pathlib.Path, args: Sequence[str], env: dict[str, str], *,
                  cwd: pathlib.Path = ROOT) -> AdkRun:
    """Runs ``python args`` without blocking this loop (the services answer
    from it while the subprocess runs)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = await asyncio.create_subprocess_exec(
        str(python), *args, cwd=str(cwd), env={**clean, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(900):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return AdkRun(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))


async def run_checks(python: pathlib.Path, checks: pathlib.Path, tmp: pathlib.Path,
                     env: dict[str, str] | None = None) -> AdkRun:
    """Runs the pytest module ``checks`` (a file of this folder) in the ADK
    venv, from a copy in ``tmp``: outside the repository, whose conftest
    files are for the main venv. tests/support/proto_diff.py is copied
    beside it (it needs nothing but protobuf)."""
    copy = tmp / f"test_{checks.name}"
    await asyncio.to_thread(shutil.copyfile, checks, copy)
    await asyncio.to_thread(shutil.copyfile, PROTO_DIFF, tmp / PROTO_DIFF.name)
    return await run_adk(
        python, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", "-rfE", "--tb=short",
                 "-p", "no:logging", str(copy)], env or {}, cwd=tmp)
