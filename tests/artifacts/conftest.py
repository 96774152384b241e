"""A real context server on 127.0.0.1:0 (each backend: the session tests'
``server_factory``) and Python clients to it, for the artifact RPC tests."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from agentctx_client import ContextClient
from agentctx_common.server import GrpcServer
from tests.sessions.conftest import ServerFactory, server_factory
from tests.support.servers import secure_channel

__all__ = ["ServerFactory", "client", "client_of", "server_factory"]


def client_of(server: GrpcServer, certs: pathlib.Path, identity: str = "agent-client") -> ContextClient:
    return ContextClient(secure_channel(server.port, certs, identity), timeout=60)


@pytest.fixture
async def client(server_factory: ServerFactory, certs_dir: pathlib.Path) -> AsyncIterator[ContextClient]:
    server = await server_factory()
    async with client_of(server, certs_dir) as c:
        yield c
