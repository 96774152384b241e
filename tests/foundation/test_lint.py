"""The linters run as part of the suite: ruff clean, mypy with zero errors
(strict on the domain packages and both clients), as `make lint` runs them."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests.support.venvs import VENV_BUILD_TIMEOUT_S

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
# mypy over the whole tree takes a core for a minute or more; on a machine
# whose cores are busy it takes several times that. The subprocess's limit
# comes first so that a timeout says which linter hung.
LINT_TIMEOUT_S = 900
TEST_TIMEOUT_S = LINT_TIMEOUT_S + 60


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=LINT_TIMEOUT_S)


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_ruff_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_mypy_has_no_errors() -> None:
    # The packages and the strict domain overrides are in pyproject.toml.
    result = _run(str(BIN / "mypy"), "--no-incremental", "--cache-dir=/dev/null")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_mypy_strict_on_the_python_client() -> None:
    result = subprocess.run([str(BIN / "mypy"), "--no-incremental", "--cache-dir=/dev/null"],
                            cwd=ROOT / "clients" / "python", capture_output=True, text=True, timeout=LINT_TIMEOUT_S)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr


@pytest.mark.timeout(TEST_TIMEOUT_S + VENV_BUILD_TIMEOUT_S)  # may build the ADK venv first
def test_mypy_strict_on_the_adk_client() -> None:
    # In the ADK venv: google-adk (and the google-genai < 3 it needs) are
    # only there, and mypy must see their types.
    from tests.adk.venv import adk_python

    result = subprocess.run([str(adk_python()), "-m", "mypy", "--no-incremental", "--cache-dir=/dev/null"],
                            cwd=ROOT / "clients" / "adk", capture_output=True, text=True, timeout=LINT_TIMEOUT_S)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr


@pytest.mark.timeout(TEST_TIMEOUT_S + VENV_BUILD_TIMEOUT_S)  # may build the SDK's venv first
def test_mypy_strict_on_the_openai_agents_client() -> None:
    # In the OpenAI Agents SDK's venv (built here on the first run).
    from tests.openai_agents.venv import openai_agents_python

    result = subprocess.run([str(openai_agents_python()), "-m", "mypy", "--no-incremental", "--cache-dir=/dev/null"],
                            cwd=ROOT / "clients" / "openai-agents", capture_output=True, text=True,
                            timeout=LINT_TIMEOUT_S)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr
