"""Runs, in the ADK venv and without a server, the unit checks of
agentctx_adk: tests/adk/adk_llm_mapping_checks.py (AgentCtxLlm's
LlmRequest/LlmResponse mapping), adk_event_cache_checks.py and
adk_field_coverage_checks.py (the ADK layer of the field-coverage contract,
tests/foundation/test_field_coverage.py)."""

from __future__ import annotations

import pathlib
import re

import pytest

from tests.adk.conftest import run_checks

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize(("checks", "count"), [("adk_llm_mapping_checks.py", 28), ("adk_event_cache_checks.py", 6),
                                                  ("adk_field_coverage_checks.py", 4)])
async def test_agentctx_adk_units(adk_venv_python: pathlib.Path, tmp_path: pathlib.Path, checks: str,
                                  count: int) -> None:
    run = await run_checks(adk_venv_python, HERE / checks, tmp_path)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) == count, run.stdout[-2000:]
