"""The context service as real processes: a kill -9 while clients append
loses no acknowledged event, and two processes appending to one session
through one PostgreSQL never duplicate or skip a sequence number."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from tests.sessions.helpers import append_request, migrate, pb_text_event
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel

pytestmark = pytest.mark.slow

SESSION = "apps/shop/users/alice/sessions/s1"


def _start(certs: pathlib.Path, tmp: pathlib.Path, db_url: str, name: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    config = write_config(
        tmp / f"{name}.toml", certs, context_port=port, cache_port=free_port(), data_dir=tmp / "data",
        context={"database_url": db_url},
    )
    proc = spawn("context", config, tmp / f"{name}.log")
    try:
        wait_healthy(port, certs, "agent-client", proc)
    except RuntimeError:
        stop(proc, signal.SIGKILL)
        raise
    return proc, port


async def _list_all(stub: context_service_pb2_grpc.ContextServiceStub) -> list[tuple[str, int]]:
    reply = await stub.ListEvents(pb.ListEventsRequest(parent=SESSION, page_size=1000))
    events = list(reply.events)
    while reply.next_page_token:
        reply = await stub.ListEvents(pb.ListEventsRequest(parent=SESSION, page_size=1000, page_token=reply.next_page_token))
        events += reply.events
    return [(e.id, e.sequence) for e in events]


async def test_kill_9_loses_no_acknowledged_event(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    await migrate(db_url)
    proc, port = await asyncio.to_thread(_start, certs_dir, tmp_path, db_url, "first")
    acked: dict[str, int] = {}
    unacked: list[str] = []
    enough = asyncio.Event()
    try:
        async with secure_channel(port, certs_dir) as channel:
            stub = context_service_pb2_grpc.ContextServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(parent="apps/shop/users/alice", session_id="s1"))

            async def appender(n: int) -> None:
                for i in range(10_000):
                    event_id = f"w{n}-{i}"
                    try:
                        reply = await stub.AppendEvent(append_request(SESSION, pb_text_event(event_id)), timeout=10)
                    except grpc.aio.AioRpcError:
                        unacked.append(event_id)  # in flight at the kill: stored or not
                        return
                    acked[event_id] = reply.event.sequence
                    if len(acked) >= 200:
                        enough.set()

            writers = [asyncio.create_task(appender(n)) for n in range(8)]
            await asyncio.wait_for(enough.wait(), timeout=60)
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.gather(*writers)
    finally:
        stop(proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert len(unacked) == 8  # every appender had a call in flight at the kill

    proc, port = await asyncio.to_thread(_start, certs_dir, tmp_path, db_url, "second")
    try:
        async with secure_channel(port, certs_dir) as channel:
            stub = context_service_pb2_grpc.ContextServiceStub(channel)
            stored = await _list_all(stub)
            assert [seq for _, seq in stored] == list(range(1, len(stored) + 1))
            by_id = dict(stored)
            assert len(by_id) == len(stored)
            for event_id, sequence in acked.items():
                assert by_id.get(event_id) == sequence
            # Retrying what was in flight completes it exactly once.
            for event_id in unacked:
                reply = await stub.AppendEvent(append_request(SESSION, pb_text_event(event_id)))
                assert reply.deduplicated == (event_id in by_id)
            after = await _list_all(stub)
            assert [seq for _, seq in after] == list(range(1, len(stored) + len(set(unacked) - set(by_id)) + 1))
    finally:
        stop(proc)


@pytest.mark.postgres
async def test_two_processes_append_to_one_session(postgres_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    await migrate(postgres_url)
    (a, port_a), (b, port_b) = await asyncio.gather(
        asyncio.to_thread(_start, certs_dir, tmp_path, postgres_url, "a"),
        asyncio.to_thread(_start, certs_dir, tmp_path, postgres_url, "b"),
    )
    try:
        async with secure_channel(port_a, certs_dir) as channel_a, secure_channel(port_b, certs_dir) as channel_b:
            stubs = [context_service_pb2_grpc.ContextServiceStub(c) for c in (channel_a, channel_b)]
            await stubs[0].CreateSession(pb.CreateSessionRequest(parent="apps/shop/users/alice", session_id="s1"))

            async def appender(n: int) -> dict[str, int]:
                mine, other = stubs[n % 2], stubs[(n + 1) % 2]
                acked = {}
                for i in range(10):
                    event = pb_text_event(f"p{n}-{i}")
                    reply = await mine.AppendEvent(append_request(SESSION, event))
                    acked[event.id] = reply.event.sequence
                    if i % 3 == 0:  # a retry through the other process finds it
                        retry = await other.AppendEvent(append_request(SESSION, event))
                        assert retry.deduplicated and retry.event.sequence == reply.event.sequence
                return acked

            results = await asyncio.gather(*(appender(n) for n in range(32)))
            acked = {k: v for r in results for k, v in r.items()}
            for stub in stubs:
                stored = await _list_all(stub)
                assert [seq for _, seq in stored] == list(range(1, 321))
                assert dict(stored) == acked
            session = await stubs[1].GetSession(pb.GetSessionRequest(name=SESSION))
            assert (session.event_count, session.last_sequence) == (320, 320)
    finally:
        stop(a)
        stop(b)
