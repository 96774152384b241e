"""Durable background jobs: a crashed process's job is picked up after a
restart, and with several processes on one database each job runs once."""

from __future__ import annotations

import asyncio
import collections

import sqlalchemy as sa

from context_service.compaction.remote import RemoteCompactor
from context_service.compaction.service import CompactionOutcome, CompactionService
from context_service.compaction.worker import CompactionWorker
from context_service.domain.config import CompactionPolicy, ContextConfig
from context_service.domain.model import CompactionTrigger, SessionKey
from context_service.storage.compaction_jobs import SqlJobStore, compaction_jobs
from context_service.storage.sql_store import open_store
from tests.compaction.builders import model, user
from tests.compaction.conftest import rpc_settings, side_service
from tests.sessions.helpers import migrate
from tests.support.servers import start_context

CONFIG = ContextConfig(compaction=CompactionPolicy(enabled=True, background_tokens=1000, keep_recent_tokens=300))


async def seed(store, key: SessionKey) -> None:
    await store.create_session(key, state={}, config=CONFIG)
    for i in range(4):
        await store.append_event(key, user(f"question {i} " + "q" * 1200, id=f"u{i}"))
        await store.append_event(key, model(f"answer {i} " + "a" * 1200, id=f"m{i}"))


async def compaction_count(store, key: SessionKey) -> int:
    return sum(e.is_compaction for e in await store.list_events(key))


async def wait_until(predicate, what: str) -> None:
    for _ in range(600):
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def test_a_job_left_by_a_crashed_process_is_picked_up_after_restart(db_url, certs_dir, tmp_path):
    await migrate(db_url)
    store = await open_store(db_url)
    key = SessionKey("app1", "u1", "crashed")
    try:
        await seed(store, key)
        jobs = SqlJobStore(store)
        assert await jobs.enqueue(key, CompactionTrigger.BACKGROUND)
        crashed = await jobs.claim("process-that-died", lease_s=0.5)
        assert crashed is not None and await compaction_count(store, key) == 0
        # A new process starts; its worker takes the job once the dead lease expires.
        server = await start_context(rpc_settings(certs_dir, tmp_path, db_url))
        try:
            await wait_until(lambda: _done(store, crashed.job_id), "the orphaned job finished")
        finally:
            await server.stop(None)
        assert await compaction_count(store, key) == 1
        assert not await jobs.finish(crashed, "process-that-died", "COMMITTED")  # the dead owner cannot finish it
    finally:
        await store.close()


async def _done(store, job_id: str) -> bool:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(compaction_jobs).where(compaction_jobs.c.job_id == job_id))).one()
    return row.state == "done" and row.outcome == "COMMITTED" and row.attempts == 2


class CountingRunner:
    """Counts the jobs one worker runs (the service does the work)."""

    def __init__(self, service: CompactionService, counts: collections.Counter) -> None:
        self._service = service
        self._counts = counts

    async def run_background(self, key: SessionKey) -> CompactionOutcome:
        self._counts[key] += 1
        return await self._service.run_background(key)


async def test_several_processes_run_each_job_once(db_url, certs_dir, tmp_path):
    await migrate(db_url)
    settings = rpc_settings(certs_dir, tmp_path, db_url)
    keys = [SessionKey("app1", "u1", f"s{i}") for i in range(10)]
    counts: collections.Counter = collections.Counter()
    processes = []
    for _ in range(3):
        store = await open_store(db_url)
        remote = RemoteCompactor(settings)
        service = side_service(settings, store, remote)
        worker = CompactionWorker(SqlJobStore(store), CountingRunner(service, counts), concurrency=2, poll_s=0.02)
        processes.append((store, remote, service, worker))
    first_store, _, first_service, _ = processes[0]
    try:
        for key in keys:
            await seed(first_store, key)
            outcome = await first_service.maybe_compact_at_turn_boundary(key)
            assert outcome.background_scheduled
        for *_, worker in processes:
            worker.start()

        async def all_compacted() -> bool:
            return all([await compaction_count(first_store, k) >= 1 for k in keys])

        await wait_until(all_compacted, "every session compacted")
        await wait_until(lambda: _no_active(first_store), "every job finished")
    finally:
        for store, remote, _, worker in processes:
            await worker.stop()
            await remote.close()
            await store.close()
    assert counts == collections.Counter({k: 1 for k in keys})  # each job ran once
    check = await open_store(db_url)
    try:
        assert [await compaction_count(check, k) for k in keys] == [1] * len(keys)
    finally:
        await check.close()


async def _no_active(store) -> bool:
    async with store.engine.connect() as conn:
        active = (await conn.execute(
            sa.select(sa.func.count()).select_from(compaction_jobs).where(compaction_jobs.c.state.in_(("pending", "running")))
        )).scalar_one()
    return active == 0
