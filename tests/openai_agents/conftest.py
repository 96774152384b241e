"""OpenAI Agents SDK tests: code importing ``agents`` runs in that SDK's
venv (tests/openai_agents/venv.py) as a subprocess, against the pair the
ADK tests use (``adk_pair``: small enough that a short conversation is
worth caching)."""

import pathlib

import pytest

from tests.adk.conftest import adk_pair  # noqa: F401  (the fixture, shared)
from tests.openai_agents.venv import openai_agents_python


@pytest.fixture(scope="session")
def oa_venv_python() -> pathlib.Path:
    return openai_agents_python()
