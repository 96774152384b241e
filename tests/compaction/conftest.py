"""Fixtures for compaction tests: a real context server on a migrated
database of each backend (``db_url``, tests/conftest.py) with a compaction
service of its own, and a remote compactor. The stores' own contract is
tests/storage/conformance/."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.server import GrpcServer
from context_service.compaction.remote import RemoteCompactor
from context_service.compaction.service import CompactionService, Compactors
from context_service.settings import ContextSettings
from context_service.storage.compaction_jobs import SqlJobStore
from context_service.storage.compactions import SqlCompactionStore
from context_service.storage.sql_store import SqlSessionStore, open_store
from tests.compaction.servers import RemoteCompactorServer, start_remote_compactor
from tests.sessions.helpers import migrate
from tests.support.servers import context_settings, secure_channel, start_context


@dataclass
class Rpc:
    """A real context server on the database, a client with the sample
    agent's certificate, and a compaction service of its own on the same
    database (another "process", without a worker) for the entry points the
    Generate flow will call."""

    stub: context_service_pb2_grpc.ContextServiceStub
    server: GrpcServer
    settings: ContextSettings
    service: CompactionService
    store: SqlSessionStore
    remote: RemoteCompactor


def rpc_settings(certs: pathlib.Path, tmp: pathlib.Path, db_url: str, **overrides: object) -> ContextSettings:
    values: dict[str, object] = dict(
        database_url=db_url, remote_compactor_targets=["*"], compaction_job_poll_s=0.05, compaction_job_lease_s=2.0,
        # In-loop extractive keeps server start-up cheap; the process pool has its own tests.
        compaction_extractive_processes=0,
    )
    values.update(overrides)
    return context_settings(certs, tmp, **values)


def side_service(settings: ContextSettings, store: SqlSessionStore, remote: RemoteCompactor) -> CompactionService:
    return CompactionService(
        store, SqlCompactionStore(store), Compactors(remote=remote), jobs=SqlJobStore(store),
        default_model=settings.default_model,
    )


@pytest.fixture
async def rpc(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Rpc]:
    await migrate(db_url)
    settings = rpc_settings(certs_dir, tmp_path, db_url)
    server = await start_context(settings)
    channel = secure_channel(server.port, certs_dir)
    store = await open_store(db_url)
    remote = RemoteCompactor(settings)
    try:
        yield Rpc(context_service_pb2_grpc.ContextServiceStub(channel), server, settings,
                  side_service(settings, store, remote), store, remote)
    finally:
        await channel.close()
        await server.stop(None)
        await remote.close()
        await store.close()


@pytest.fixture
async def remote_server() -> AsyncIterator[RemoteCompactorServer]:
    server = await start_remote_compactor()
    yield server
    await server.stop()
