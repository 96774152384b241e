"""Runs tests/adk/adk_llm_checks.py (AgentCtxLlm under ADK's Runner) in
the ADK venv against a context service and cache service this test starts."""

from __future__ import annotations

import os
import pathlib

from tests.adk.conftest import pair_env, run_adk
from tests.support.pair import ServicePair

HERE = pathlib.Path(__file__).parent


async def test_agentctx_llm_under_adks_runner(adk_venv_python: pathlib.Path, adk_pair: ServicePair,
                                              tmp_path: pathlib.Path) -> None:
    # Outside the repository: its conftest files are for the main venv.
    checks = tmp_path / "test_adk_llm_checks.py"
    checks.write_text((HERE / "adk_llm_checks.py").read_text())
    run = await run_adk(
        adk_venv_python,
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", "-rfE", "--tb=short", "-p", "no:logging", str(checks)],
        {**pair_env(adk_pair), "AGENTCTX_ADK_RUN": f"llm{os.getpid()}"}, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    assert "2 passed" in run.stdout, run.stdout[-2000:]
