"""A virtual environment that holds only agentctx-client and its
dependencies (pinned by the root constraints.txt), built once under
.venv-client/<hash of clients/python/pyproject.toml and constraints.txt>
and reused; the client itself is reinstalled whenever its sources (or the
generated stubs) change."""

from __future__ import annotations

import pathlib

from tests.support.venvs import cached_venv

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
CONSTRAINTS = ROOT / "constraints.txt"
VENVS = ROOT / ".venv-client"


def client_python() -> pathlib.Path:
    """The python of the client-only venv, built or refreshed as needed."""
    return cached_venv(VENVS, key_files=[CLIENT / "pyproject.toml", CONSTRAINTS], constraints=CONSTRAINTS,
                       install=[str(CLIENT)], packages=[CLIENT])
