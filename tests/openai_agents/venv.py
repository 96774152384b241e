"""The OpenAI Agents SDK venv: openai-agents brings its own openai, MCP
and web stack, so agentctx-openai-agents runs in a venv of its own holding
it, agentctx-client and their test and lint extras (pinned by
clients/openai-agents/constraints.txt). Built once under
.venv-openai-agents/<hash of its pyproject.toml and constraints.txt> and
reused; the two clients are reinstalled whenever their sources change."""

from __future__ import annotations

import pathlib

from tests.support.venvs import cached_venv

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "openai-agents"
CLIENT = ROOT / "clients" / "python"
CONSTRAINTS = PACKAGE / "constraints.txt"
VENVS = ROOT / ".venv-openai-agents"


def openai_agents_python() -> pathlib.Path:
    """The python of the venv, built or refreshed as needed."""
    return cached_venv(VENVS, key_files=[PACKAGE / "pyproject.toml", CONSTRAINTS], constraints=CONSTRAINTS,
                       install=[str(CLIENT), f"{PACKAGE}[test,lint]"], packages=[CLIENT, PACKAGE])


if __name__ == "__main__":
    print(openai_agents_python())
