"""Runs tests/openai_agents/oa_session_checks.py (AgentCtxSession under the
OpenAI Agents SDK) in the SDK's venv against a pair this test starts."""

from __future__ import annotations

import os
import pathlib

import pytest

from tests.adk.conftest import run_checks
from tests.support.pair import ServicePair

HERE = pathlib.Path(__file__).parent


# The first run builds the SDK's venv (about a minute at rest, several under load).
@pytest.mark.timeout(900)
async def test_agentctx_session_under_the_openai_agents_sdk(oa_venv_python: pathlib.Path, adk_pair: ServicePair,
                                                            tmp_path: pathlib.Path) -> None:
    env = {"AGENTCTX_OA_TARGET": f"127.0.0.1:{adk_pair.context_port}",
           "AGENTCTX_OA_CA": str(adk_pair.certs / "ca.pem"), "AGENTCTX_OA_RUN": f"oa{os.getpid()}",
           "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    run = await run_checks(oa_venv_python, HERE / "oa_session_checks.py", tmp_path, env)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    assert "6 passed" in run.stdout, run.stdout[-2000:]


@pytest.mark.timeout(900)
async def test_bench_runs_the_same_conversation_on_both_sessions(oa_venv_python: pathlib.Path,
                                                                 tmp_path: pathlib.Path) -> None:
    """bench.openai_agents' code path on two turns: both sides make the same
    session calls, and the cache tier served part of the prompts."""
    from bench.openai_agents import run

    figures = await run(turns=2, rounds=1, tmp=tmp_path)
    assert "error" not in figures, figures
    assert figures["agentctx_calls"] == figures["sqlite_calls"]
    assert figures["session_ops_ratio"] > 0 and 0 < figures["cached_share"] < 1
