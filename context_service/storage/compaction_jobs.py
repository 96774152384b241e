"""Durable background compaction jobs.

One row per job; at most one pending or running job per session (a partial
unique index). Workers in any number of processes claim a job with one
atomic UPDATE ... RETURNING (its subquery takes FOR UPDATE SKIP LOCKED on
PostgreSQL; SQLite's BEGIN IMMEDIATE serializes it) and hold it with a
lease they renew. A job whose lease expired (its worker died) is claimed
again; a job whose worker finished is marked done only by that worker.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable

import sqlalchemy as sa

from context_service.domain.compaction_rules.jobs import Job
from context_service.domain.model import CompactionTrigger, SessionKey
from context_service.storage.sql_store import SqlSessionStore, key_clause
from context_service.storage.tables import UtcDateTime, metadata, sessions

PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
_ACTIVE = sa.text("state IN ('pending', 'running')")

compaction_jobs = sa.Table(
    "compaction_jobs",
    metadata,
    sa.Column("job_id", sa.String(32), primary_key=True),
    sa.Column("session_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
              sa.ForeignKey("sessions.pk", ondelete="CASCADE"), nullable=False),
    sa.Column("trigger", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("lease_owner", sa.String(64)),
    sa.Column("lease_expires_at", UtcDateTime),
    sa.Column("not_before", UtcDateTime, nullable=False),
    sa.Column("create_time", UtcDateTime, nullable=False),
    sa.Column("update_time", UtcDateTime, nullable=False),
    # A reason or an outcome code, never content.
    sa.Column("outcome", sa.String(64), nullable=False, server_default=""),
    sa.Index("uq_compaction_jobs_active_session", "session_pk", unique=True,
             sqlite_where=_ACTIVE, postgresql_where=_ACTIVE),
    sa.Index("ix_compaction_jobs_state_not_before", "state", "not_before"),
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SqlJobStore:
    def __init__(self, store: SqlSessionStore, *, clock: Callable[[], dt.datetime] = _utcnow) -> None:
        self._store = store
        self._clock = clock

    async def enqueue(self, key: SessionKey, trigger: CompactionTrigger) -> bool:
        now = self._clock()
        async with self._store.write_transaction() as conn:
            live = (await self._store.lock_sessions(conn, {key})).get(key)
            if live is None:
                return False  # deleted meanwhile: nothing to compact
            active = await conn.execute(
                sa.select(compaction_jobs.c.job_id).where(compaction_jobs.c.session_pk == live.pk, _ACTIVE)
            )
            if active.first() is not None:
                return False
            await conn.execute(sa.insert(compaction_jobs).values(
                job_id=uuid.uuid4().hex, session_pk=live.pk, trigger=trigger.value, state=PENDING, attempts=0,
                not_before=now, create_time=now, update_time=now, outcome="",
            ))
        return True

    async def claim(self, owner: str, lease_s: float) -> Job | None:
        """The oldest runnable job, now leased to ``owner``: pending and due,
        or running with an expired lease (its worker is gone)."""
        now = self._clock()
        j = compaction_jobs
        runnable = (
            sa.select(j.c.job_id)
            .where(sa.or_(
                sa.and_(j.c.state == PENDING, j.c.not_before <= now),
                sa.and_(j.c.state == RUNNING, j.c.lease_expires_at < now),
            ))
            .order_by(j.c.not_before)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        claim = (
            sa.update(j)
            .where(j.c.job_id == runnable)
            .values(state=RUNNING, lease_owner=owner, lease_expires_at=now + dt.timedelta(seconds=lease_s),
                    attempts=j.c.attempts + 1, update_time=now)
            .returning(j.c.job_id, j.c.session_pk, j.c.trigger, j.c.attempts)
        )
        async with self._store.write_transaction() as conn:
            row = (await conn.execute(claim)).first()
            if row is None:
                return None
            s = (await conn.execute(
                sa.select(sessions.c.app, sessions.c.user_id, sessions.c.session_id).where(sessions.c.pk == row.session_pk)
            )).one()
        return Job(row.job_id, SessionKey(s.app, s.user_id, s.session_id), CompactionTrigger(row.trigger), row.attempts)

    async def heartbeat(self, job: Job, owner: str, lease_s: float) -> bool:
        """Extends the lease; False when the job is no longer this owner's."""
        now = self._clock()
        return await self._update_owned(
            job, owner, lease_expires_at=now + dt.timedelta(seconds=lease_s), update_time=now
        )

    async def finish(self, job: Job, owner: str, outcome: str) -> bool:
        return await self._update_owned(
            job, owner, state=DONE, outcome=outcome[:64], lease_owner=None, lease_expires_at=None,
            update_time=self._clock(),
        )

    async def fail(self, job: Job, owner: str, reason: str, *, retry_after_s: float | None) -> bool:
        """Back to pending after ``retry_after_s``, or failed for good."""
        now = self._clock()
        if retry_after_s is None:
            return await self._update_owned(
                job, owner, state=FAILED, outcome=reason[:64], lease_owner=None, lease_expires_at=None, update_time=now
            )
        return await self._update_owned(
            job, owner, state=PENDING, outcome=reason[:64], lease_owner=None, lease_expires_at=None,
            not_before=now + dt.timedelta(seconds=retry_after_s), update_time=now,
        )

    async def release(self, job: Job, owner: str) -> bool:
        """Hands a job back untried (this process is stopping)."""
        return await self._update_owned(
            job, owner, state=PENDING, lease_owner=None, lease_expires_at=None,
            attempts=compaction_jobs.c.attempts - 1, update_time=self._clock(),
        )

    async def _update_owned(self, job: Job, owner: str, **values: object) -> bool:
        j = compaction_jobs
        stmt = sa.update(j).where(j.c.job_id == job.job_id, j.c.lease_owner == owner, j.c.state == RUNNING)
        async with self._store.write_transaction() as conn:
            result = await conn.execute(stmt.values(**values))
        return result.rowcount == 1

    async def active_count(self, key: SessionKey) -> int:
        """Pending or running jobs of a session (diagnostics)."""
        stmt = (
            sa.select(sa.func.count())
            .select_from(compaction_jobs.join(sessions, compaction_jobs.c.session_pk == sessions.c.pk))
            .where(key_clause(key), compaction_jobs.c.state.in_((PENDING, RUNNING)))
        )
        async with self._store.read_connection() as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def purge_finished(self, older_than_s: float) -> int:
        """Deletes done and failed jobs older than ``older_than_s``."""
        cutoff = self._clock() - dt.timedelta(seconds=older_than_s)
        j = compaction_jobs
        async with self._store.write_transaction() as conn:
            result = await conn.execute(
                sa.delete(j).where(j.c.state.in_((DONE, FAILED)), j.c.update_time < cutoff)
            )
        return result.rowcount
