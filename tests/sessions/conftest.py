"""Fixtures for the session tests: the store on each backend (``db_url``,
tests/conftest.py), and a real context server with
channels presenting the dev certificates."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.server import GrpcServer
from context_service.storage.sql_store import SqlSessionStore, open_store
from tests.sessions.helpers import migrate
from tests.support.servers import context_settings, secure_channel, start_context


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlSessionStore]:
    await migrate(db_url)
    opened = await open_store(db_url)
    yield opened
    await opened.close()


ServerFactory = Callable[..., Awaitable[GrpcServer]]


@pytest.fixture
async def server_factory(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServerFactory]:
    """Starts context servers on the test database with settings overrides;
    all are stopped at the end of the test."""
    await migrate(db_url)
    started: list[GrpcServer] = []

    async def start(**overrides: Any) -> GrpcServer:
        server = await start_context(context_settings(certs_dir, tmp_path, database_url=db_url, **overrides))
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop(0)


@pytest.fixture
async def server(server_factory: ServerFactory) -> GrpcServer:
    return await server_factory()


@pytest.fixture
async def channel(server: GrpcServer, certs_dir: pathlib.Path) -> AsyncIterator[grpc.aio.Channel]:
    async with secure_channel(server.port, certs_dir) as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> context_service_pb2_grpc.ContextServiceStub:
    """A client with the sample agent's certificate (allowed every app)."""
    return context_service_pb2_grpc.ContextServiceStub(channel)
