"""Runs tests/adk/adk_tool_context_checks.py (AgentCtxToolPlugin: ADK tools
on their tool tokens) in the ADK venv against a pair this test starts."""

from __future__ import annotations

import os
import pathlib

from tests.adk.conftest import pair_env, run_checks
from tests.support.pair import ServicePair

HERE = pathlib.Path(__file__).parent


async def test_adk_tools_run_on_their_tool_tokens(adk_venv_python: pathlib.Path, adk_pair: ServicePair,
                                                  tmp_path: pathlib.Path) -> None:
    run = await run_checks(adk_venv_python, HERE / "adk_tool_context_checks.py", tmp_path,
                           {**pair_env(adk_pair), "AGENTCTX_ADK_RUN": f"tools{os.getpid()}"})
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    assert "2 passed" in run.stdout, run.stdout[-2000:]
