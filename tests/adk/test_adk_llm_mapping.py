"""Runs tests/adk/adk_llm_mapping_checks.py (the LlmRequest/LlmResponse
mapping of AgentCtxLlm, without a server) in the ADK venv."""

from __future__ import annotations

import pathlib
import re

from tests.adk.conftest import run_checks

HERE = pathlib.Path(__file__).parent


async def test_the_adk_model_mapping(adk_venv_python: pathlib.Path, tmp_path: pathlib.Path) -> None:
    run = await run_checks(adk_venv_python, HERE / "adk_llm_mapping_checks.py", tmp_path)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) >= 25, run.stdout[-2000:]
