"""Client tests import agentctx_client from clients/python when the
environment has not installed it (``pip install -e clients/python``)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import agentctx  # noqa: F401 - bound first, so the stubs keep the path they were installed from

CLIENT_DIR = pathlib.Path(__file__).parents[2] / "clients" / "python"

if importlib.util.find_spec("agentctx_client") is None:
    sys.path.append(str(CLIENT_DIR))


import pytest  # noqa: E402 - after the path set-up above

from tests.client.servers import ScriptedContextService, start  # noqa: E402


@pytest.fixture
async def scripted():  # type: ignore[no-untyped-def]
    """(service, target): a ScriptedContextService on 127.0.0.1:0."""
    service = ScriptedContextService()
    server, target = await start(service)
    yield service, target
    await server.stop(None)
