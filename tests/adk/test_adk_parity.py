"""Runs tests/adk/adk_parity_checks.py in the ADK venv: every scenario on
AgentCtxSessionService (against a context service this test starts) and on
ADK's own DatabaseSessionService on a SQLite file, with the same results.
It needs no copy of ADK's tests, so it never skips; its scenarios cover
every behaviour ADK's own session contract tests ask of a backend."""

from __future__ import annotations

import os
import pathlib
import re

from tests.adk.conftest import pair_env, run_checks
from tests.support.pair import ServicePair

HERE = pathlib.Path(__file__).parent


async def test_session_service_matches_adks_database_service(adk_venv_python: pathlib.Path, adk_pair: ServicePair,
                                                             tmp_path: pathlib.Path) -> None:
    run = await run_checks(adk_venv_python, HERE / "adk_parity_checks.py", tmp_path,
                           {**pair_env(adk_pair), "AGENTCTX_ADK_RUN": f"parity{os.getpid()}"})
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-3000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) == 4 * 21, run.stdout[-2000:]
