"""Runs tests/adk/adk_llm_checks.py (AgentCtxLlm under ADK's Runner) in
the ADK venv against a context service and cache service this test starts."""

from __future__ import annotations

import os
import pathlib

from tests.adk.conftest import pair_env, run_checks
from tests.support.pair import ServicePair

HERE = pathlib.Path(__file__).parent


async def test_agentctx_llm_under_adks_runner(adk_venv_python: pathlib.Path, adk_pair: ServicePair,
                                              tmp_path: pathlib.Path) -> None:
    run = await run_checks(adk_venv_python, HERE / "adk_llm_checks.py", tmp_path,
                           {**pair_env(adk_pair), "AGENTCTX_ADK_RUN": f"llm{os.getpid()}"})
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    assert "4 passed" in run.stdout, run.stdout[-2000:]
