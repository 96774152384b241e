"""ADK's own session-service tests, held against AgentCtxSessionService.

The tests are ADK's (google/adk-python, tests/unittests/sessions/
test_session_service.py), never copied into this repository: they are
read at test time from a checkout named by AGENTCTX_ADK_TESTS (a directory
holding test_session_service.py, or an adk-python checkout), or from a git
copy of adk-python named by AGENTCTX_ADK_REPO, into a temporary directory,
and run in the ADK venv with tests/adk/adk_suite_plugin.py, which points
their DATABASE service at AgentCtxSessionService on a context service this
test starts. Without either, the test is skipped.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

from tests.adk.conftest import pair_env, run_adk
from tests.support.pair import ServicePair

SUITE = "tests/unittests/sessions/test_session_service.py"
# Where this workplace's fetch of github:google/adk-python lands.
DEFAULT_REPO = pathlib.Path("/work/.mirror/google+adk-python/repo")
HERE = pathlib.Path(__file__).parent


def _suite_text() -> str | None:
    tests = os.environ.get("AGENTCTX_ADK_TESTS")
    if tests:
        for candidate in (pathlib.Path(tests) / "test_session_service.py", pathlib.Path(tests) / SUITE):
            if candidate.is_file():
                return candidate.read_text()
    repo = pathlib.Path(os.environ.get("AGENTCTX_ADK_REPO", DEFAULT_REPO))
    if repo.is_dir():
        shown = subprocess.run(["git", "--git-dir", str(repo), "show", f"HEAD:{SUITE}"],
                               capture_output=True, text=True, timeout=60)
        if shown.returncode == 0:
            return shown.stdout
    return None


def _outcomes(stdout: str) -> dict[str, str]:
    """test id -> PASSED/FAILED/ERROR/XFAIL..., from pytest's -rA summary."""
    found = re.findall(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)", stdout, re.MULTILINE)
    return {name: outcome for outcome, name in found}


async def test_adk_session_suite_passes_against_agentctx(adk_venv_python: pathlib.Path, adk_pair: ServicePair,
                                                          tmp_path: pathlib.Path) -> None:
    """Every test of ADK's suite that ADK's own DatabaseSessionService (the
    control, same ADK release) passes, AgentCtxSessionService passes too.
    Tests the control fails are the suite's drift from the installed ADK
    (a copy older or newer than google-adk in the ADK venv)."""
    text = _suite_text()
    if text is None:
        pytest.skip("no copy of ADK's session tests: set AGENTCTX_ADK_TESTS or AGENTCTX_ADK_REPO")
    suite = tmp_path / "adk_suite"
    suite.mkdir()
    (suite / "test_session_service.py").write_text(text)
    args = ["-m", "pytest", "-q", "-p", "adk_suite_plugin", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
            "-rA", str(suite / "test_session_service.py")]
    env = {**pair_env(adk_pair), "PYTHONPATH": str(HERE), "AGENTCTX_ADK_RUN": f"suite{os.getpid()}"}
    control = await run_adk(adk_venv_python, args, {**env, "AGENTCTX_ADK_CONTROL": "1"}, cwd=suite)
    ours = await run_adk(adk_venv_python, args, env, cwd=suite)
    expected, got = _outcomes(control.stdout), _outcomes(ours.stdout)
    assert expected, control.stdout[-3000:] + control.stderr[-3000:]
    passing = {name for name, outcome in expected.items() if outcome == "PASSED"}
    regressions = {name: got.get(name, "not run") for name in passing if got.get(name) != "PASSED"}
    assert not regressions, ours.stdout[-8000:] + ours.stderr[-3000:]
    assert len(passing) >= 6
