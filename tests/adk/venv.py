"""The ADK virtual environment: google-adk 2.x needs google-genai below 3,
the cache service 3.x, so ADK runs in a venv of its own holding
agentctx-adk, agentctx-client and their test and lint extras (pinned by
clients/adk/constraints.txt). Built once under
.venv-adk/<hash of clients/adk/pyproject.toml and its constraints.txt> and
reused; the two clients are reinstalled whenever their sources change."""

from __future__ import annotations

import pathlib

from tests.support.venvs import cached_venv, venv_ready

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADK = ROOT / "clients" / "adk"
CLIENT = ROOT / "clients" / "python"
CONSTRAINTS = ADK / "constraints.txt"
VENVS = ROOT / ".venv-adk"


KEY_FILES = [ADK / "pyproject.toml", CONSTRAINTS]
PACKAGES = [CLIENT, ADK]


def adk_venv_ready() -> bool:
    """Whether ``adk_python()`` would return at once."""
    return venv_ready(VENVS, key_files=KEY_FILES, packages=PACKAGES)


def adk_python() -> pathlib.Path:
    """The python of the ADK venv, built or refreshed as needed."""
    return cached_venv(VENVS, key_files=KEY_FILES, constraints=CONSTRAINTS,
                       install=[str(CLIENT), f"{ADK}[test,lint]"], packages=PACKAGES)


if __name__ == "__main__":
    print(adk_python())
