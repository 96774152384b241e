"""The store contract, compaction (ports.CompactionStore, CompactionJobs)
on every backend: the commit is atomic and refused (ABORTED
COMPACTION_CONFLICT, nothing written) when the session moved under its
plan; the view extends with appends; jobs are one active per session,
claimed exclusively and leased to their owner."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import pytest

from agentctx_common.errors import AgentCtxError, Code
from context_service.domain.compaction_rules.plan import CompactionPlan, build_compaction_event, plan_compaction
from context_service.domain.compaction_rules.policy import resolve
from context_service.domain.compaction_rules.summary import SummaryResult
from context_service.domain.config import CompactionPolicy, ContextConfig
from context_service.domain.model import CompactionTrigger, Event, SessionKey
from context_service.storage.factory import Backend
from tests.compaction.builders import model, tool, user

KEY = SessionKey("app1", "u1", "s1")
NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
POLICY = resolve(CompactionPolicy(keep_recent_tokens=200))


async def seed(stores: Backend, events: list[Event], key: SessionKey = KEY) -> None:
    await stores.sessions.create_session(key, state={}, config=ContextConfig())
    for i, e in enumerate(events, 1):
        await stores.sessions.append_event(key, dataclasses.replace(e, id=f"e{i}"))


def conversation() -> list[Event]:
    return [
        user("Please refactor src/app/main.py " + "a" * 1200),
        model("On it.", [("c1", "read_file")]),
        tool("c1", "read_file", "b" * 1200),
        model("Done reading. " + "c" * 800),
        user("Thanks, continue."),
        model("Continuing."),
    ]


async def plan_for(stores: Backend, key: SessionKey = KEY, trigger=CompactionTrigger.MANUAL) -> CompactionPlan:
    plan = plan_compaction(await stores.compactions.load_history(key), POLICY, trigger)
    assert isinstance(plan, CompactionPlan)
    return plan


def event_for(plan: CompactionPlan, summary: str = "summary") -> Event:
    return build_compaction_event(
        plan, SummaryResult(summary), POLICY, event_id=f"cmp-{summary}", checkpoint_id=f"cp-{summary}", now=NOW
    )


async def test_commit_appends_a_compaction_and_keeps_every_source_event(stores: Backend):
    await seed(stores, conversation())
    before = await stores.sessions.get_session(KEY)
    plan = await plan_for(stores)
    stored = await stores.compactions.commit(KEY, plan, event_for(plan))
    assert stored.sequence == 7 and stored.is_compaction
    after = await stores.sessions.get_session(KEY)
    assert after.last_sequence == 7 and after.event_count == 7
    assert after.etag == before.etag  # compaction changes nothing a client wrote
    listed = await stores.sessions.list_events(KEY)
    assert [e.id for e in listed[:6]] == [f"e{i}" for i in range(1, 7)]
    assert listed[6].compaction == stored.compaction
    h = await stores.compactions.load_history(KEY)
    assert h.latest_compaction is not None and h.latest_compaction.sequence == 7
    assert h.visible[0].sequence == stored.compaction.first_kept_sequence
    assert h.previous_summary == "summary"


async def test_two_overlapping_compactions_exactly_one_commits(stores: Backend):
    """pi #2911: overlapping compactions."""
    await seed(stores, conversation())
    first, second = await plan_for(stores), await plan_for(stores, trigger=CompactionTrigger.BACKGROUND)
    results = await asyncio.gather(
        stores.compactions.commit(KEY, first, event_for(first, "one")),
        stores.compactions.commit(KEY, second, event_for(second, "two")),
        return_exceptions=True,
    )
    committed = [r for r in results if isinstance(r, Event)]
    refused = [r for r in results if isinstance(r, AgentCtxError)]
    assert len(committed) == 1 and len(refused) == 1
    assert refused[0].code is Code.ABORTED and refused[0].reason == "COMPACTION_CONFLICT"
    events = await stores.sessions.list_events(KEY)
    assert len(events) == 7 and sum(e.is_compaction for e in events) == 1


async def test_appends_made_while_compacting_are_kept(stores: Backend):
    await seed(stores, conversation())
    plan = await plan_for(stores)
    await stores.sessions.append_event(KEY, user("one more", id="late1"))
    stored = await stores.compactions.commit(KEY, plan, event_for(plan))
    assert stored.sequence == 8
    h = await stores.compactions.load_history(KEY)
    assert [e.id for e in h.visible][-1] == "late1"
    assert stored.compaction.checkpoint.retained_event_count == 7 - stored.compaction.first_kept_sequence + 1


async def test_a_recreated_session_refuses_an_old_plan(stores: Backend):
    await seed(stores, conversation())
    plan = await plan_for(stores)
    await stores.sessions.delete_session(KEY)
    await seed(stores, conversation())
    with pytest.raises(AgentCtxError) as exc:
        await stores.compactions.commit(KEY, plan, event_for(plan))
    assert exc.value.reason == "COMPACTION_CONFLICT"
    assert not any(e.is_compaction for e in await stores.sessions.list_events(KEY))


async def test_a_deleted_session_is_not_found(stores: Backend):
    await seed(stores, conversation())
    plan = await plan_for(stores)
    await stores.sessions.delete_session(KEY)
    with pytest.raises(AgentCtxError) as exc:
        await stores.compactions.commit(KEY, plan, event_for(plan))
    assert exc.value.code is Code.NOT_FOUND
    with pytest.raises(AgentCtxError):
        await stores.compactions.load_history(KEY)


# --- jobs -------------------------------------------------------------------------


async def test_one_active_job_per_session_and_claims_are_exclusive(stores: Backend):
    await seed(stores, conversation())
    jobs = stores.jobs
    assert await jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)
    assert not await jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)
    assert await jobs.active_count(KEY) == 1
    job = await jobs.claim("w1", 30)
    assert job is not None and job.key == KEY and job.attempts == 1
    assert await jobs.claim("w2", 30) is None
    assert not await jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)  # still running
    assert await jobs.heartbeat(job, "w1", 30)
    assert not await jobs.finish(job, "w2", "COMMITTED")  # not w2's
    assert await jobs.finish(job, "w1", "COMMITTED")
    assert await jobs.active_count(KEY) == 0
    assert await jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)


async def test_an_expired_lease_is_claimed_again(stores: Backend):
    await seed(stores, conversation())
    jobs = stores.jobs
    await jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)
    crashed = await jobs.claim("dead-worker", 30)
    assert crashed is not None
    assert await jobs.claim("w2", 30) is None  # leased
    assert await jobs.heartbeat(crashed, "dead-worker", 0)  # its last heartbeat: the lease ends now
    await asyncio.sleep(0.05)
    again = await jobs.claim("w2", 30)
    assert again is not None and again.job_id == crashed.job_id and again.attempts == 2
    assert not await jobs.heartbeat(crashed, "dead-worker", 30)
    assert not await jobs.finish(crashed, "dead-worker", "COMMITTED")  # its lease is gone
    assert await jobs.finish(again, "w2", "COMMITTED")


async def test_failed_jobs_retry_later_then_give_up(stores: Backend):
    later, soon = KEY, SessionKey("app1", "u1", "s2")
    await seed(stores, conversation(), later)
    await seed(stores, conversation(), soon)
    jobs = stores.jobs
    await jobs.enqueue(later, CompactionTrigger.BACKGROUND)
    job = await jobs.claim("w", 30)
    assert job is not None and job.key == later
    assert await jobs.fail(job, "w", "COMPACTOR_TIMEOUT", retry_after_s=3600)
    assert await jobs.active_count(later) == 1
    await jobs.enqueue(soon, CompactionTrigger.BACKGROUND)
    job = await jobs.claim("w", 30)
    assert job is not None and job.key == soon  # the other is not due before its retry time
    assert await jobs.fail(job, "w", "COMPACTOR_TIMEOUT", retry_after_s=0)
    await asyncio.sleep(0.05)
    job = await jobs.claim("w", 30)
    assert job is not None and job.key == soon and job.attempts == 2
    assert await jobs.fail(job, "w", "COMPACTOR_TIMEOUT", retry_after_s=None)
    assert await jobs.active_count(soon) == 0 and await jobs.claim("w", 30) is None
    assert await jobs.purge_finished(3600) == 0  # not an hour old
    await asyncio.sleep(0.05)
    assert await jobs.purge_finished(0.01) == 1  # the failed one, not the pending one
    assert await jobs.active_count(later) == 1


async def test_released_jobs_go_back_untried(stores: Backend):
    await seed(stores, conversation())
    await stores.jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)
    job = await stores.jobs.claim("w", 30)
    assert await stores.jobs.release(job, "w")
    again = await stores.jobs.claim("w2", 30)
    assert again is not None and again.attempts == 1


async def test_deleting_a_session_drops_its_jobs(stores: Backend):
    await seed(stores, conversation())
    await stores.jobs.enqueue(KEY, CompactionTrigger.BACKGROUND)
    await stores.sessions.delete_session(KEY)
    assert await stores.jobs.claim("w", 30) is None


async def test_concurrent_claimers_take_each_job_once(stores: Backend):
    keys = [SessionKey("app1", "u1", f"s{i}") for i in range(12)]
    for key in keys:
        await stores.sessions.create_session(key, state={}, config=ContextConfig())
        await stores.jobs.enqueue(key, CompactionTrigger.BACKGROUND)

    async def claimer(name: str) -> list[str]:
        got = []
        while (job := await stores.jobs.claim(name, 30)) is not None:
            got.append(job.job_id)
        return got

    results = await asyncio.gather(*(claimer(f"w{i}") for i in range(4)))
    claimed = [j for r in results for j in r]
    assert len(claimed) == 12 and len(set(claimed)) == 12


# --- the per-process view cache -----------------------------------------------------


async def test_views_extend_with_appends_and_rebuild_after_compaction_or_recreation(stores: Backend):
    from context_service.compaction.views import Views

    await seed(stores, conversation())
    views = Views(stores.compactions)
    first = await views.load(KEY)
    assert len(first.history.visible) == 6 and len(first.measures) == 6
    await stores.sessions.append_event(KEY, user("more", id="more1"))
    second = await views.load(KEY)
    assert second.history.visible[:6] == first.history.visible and second.history.visible[0] is first.history.visible[0]
    assert [e.id for e in second.history.visible][-1] == "more1" and len(second.measures) == 7
    # A compaction committed elsewhere: the view is rebuilt from the kept tail.
    plan = plan_compaction(second.history, POLICY, CompactionTrigger.MANUAL)
    stored = await stores.compactions.commit(KEY, plan, event_for(plan))
    third = await views.load(KEY)
    assert third.history.latest_compaction == stored
    assert third.history.visible[0].sequence == stored.compaction.first_kept_sequence
    # Seeded right after a commit, then extended past the compaction entry.
    views.committed(KEY, plan, second.measures, stored)
    await stores.sessions.append_event(KEY, user("after", id="after1"))
    fourth = await views.load(KEY)
    assert [e.id for e in fourth.history.visible] == [e.id for e in third.history.visible] + ["after1"]
    assert len(fourth.measures) == len(fourth.history.visible)
    # Deleted and created again: another session, rebuilt.
    await stores.sessions.delete_session(KEY)
    await seed(stores, conversation()[:2])
    fifth = await views.load(KEY)
    assert [e.id for e in fifth.history.visible] == ["e1", "e2"] and fifth.history.latest_compaction is None
