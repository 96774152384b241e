"""A real context server on 127.0.0.1:0 (each database backend, with the
artifact bytes in the database and in a local S3-compatible server) and
Python clients to it, for the artifact RPC tests."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentctx_client import ContextClient
from agentctx_common.server import GrpcServer
from tests.sessions.conftest import ServerFactory
from tests.sessions.helpers import migrate
from tests.support.s3 import new_bucket, settings_for
from tests.support.servers import context_settings, secure_channel, start_context

__all__ = ["ServerFactory", "artifact_bytes", "client", "client_of", "server_factory"]


def client_of(server: GrpcServer, certs: pathlib.Path, identity: str = "agent-client") -> ContextClient:
    return ContextClient(secure_channel(server.port, certs, identity), timeout=60)


@pytest.fixture(params=["database", "s3"])
def artifact_bytes(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Where artifact bytes live: settings for the database (none) or a new
    bucket of the local S3-compatible server."""
    if request.param == "database":
        return {}
    endpoint: str = request.getfixturevalue("s3_endpoint")
    return settings_for(endpoint, new_bucket(endpoint))


@pytest.fixture
async def server_factory(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path,
                         artifact_bytes: dict[str, Any]) -> AsyncIterator[ServerFactory]:
    """Starts context servers on the test database (and bucket) with settings
    overrides; all are stopped at the end of the test."""
    await migrate(db_url)
    started: list[GrpcServer] = []

    async def start(**overrides: Any) -> GrpcServer:
        settings = context_settings(certs_dir, tmp_path, database_url=db_url, **{**artifact_bytes, **overrides})
        server = await start_context(settings)
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop(0)


@pytest.fixture
async def client(server_factory: ServerFactory, certs_dir: pathlib.Path) -> AsyncIterator[ContextClient]:
    server = await server_factory()
    async with client_of(server, certs_dir) as c:
        yield c
