"""Plans, compaction events and the commit checks, pure; chained
compactions over random histories."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_common.errors import AgentCtxError, Code
from context_service.domain.compaction_rules.checkpoint import checkpoint_to_json, source_fingerprint
from context_service.domain.compaction_rules.extractive import summarize
from context_service.domain.compaction_rules.history import history_from_events
from context_service.domain.compaction_rules.plan import (
    CompactionPlan,
    NothingToCompact,
    build_compaction_event,
    check_commit,
    plan_compaction,
)
from context_service.domain.compaction_rules.policy import resolve
from context_service.domain.compaction_rules.summary import SummaryResult
from context_service.domain.config import CompactionPolicy
from context_service.domain.model import CompactionTrigger, Event, EventKind, Usage
from tests.compaction.builders import histories, model, numbered, tool, user
from tests.compaction.reference import tail_ok

NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)


def policy(**kw):
    return resolve(CompactionPolicy(**kw))


def commit(events: list[Event], plan: CompactionPlan, pol, summary: str | None = None, usage=None) -> list[Event]:
    """Appends the compaction entry the way a store would."""
    text = summary if summary is not None else summarize(plan.request.events, plan.previous_summary, 4096, 1 << 20)
    event = build_compaction_event(plan, SummaryResult(text, usage), pol, event_id=f"cmp{len(events)}",
                                   checkpoint_id=f"cp{len(events)}", now=NOW)
    appended = [e for e in events if e.sequence > plan.read_last_sequence]
    latest = max((e.sequence for e in events if e.is_compaction), default=0)
    event = check_commit(plan, event, latest, appended)
    return [*events, dataclasses.replace(event, sequence=len(events) + 1)]


def long_history() -> list[Event]:
    return numbered([
        user("Goal: migrate the billing job to src/billing/job.py. " + "context " * 300),
        model("Reading it.", [("c1", "read_file")]),
        tool("c1", "read_file", "x" * 3000),
        model("We decided to keep the cron schedule. " + "y " * 400),
        user("Great, now run the tests."),
        model("", [("c2", "run_tests")]),
        tool("c2", "run_tests", "passed"),
        model("All tests pass."),
    ])


def test_plan_and_event_name_the_exact_range():
    events = long_history()
    pol = policy(keep_recent_tokens=300)
    plan = plan_compaction(history_from_events(events), pol, CompactionTrigger.MANUAL, session="s")
    assert isinstance(plan, CompactionPlan)
    out = commit(events, plan, pol, usage=Usage(prompt_tokens=5))
    entry = out[-1]
    c = entry.compaction
    assert entry.kind is EventKind.COMPACTION and entry.author == "compactor" and entry.sequence == 9
    assert c.start_sequence == 1 and c.end_sequence == plan.cut.index
    assert c.first_kept_sequence == c.end_sequence + 1 and c.first_kept_event_id == f"e{c.first_kept_sequence}"
    cp = c.checkpoint
    assert cp.schema_version == 1 and cp.trigger is CompactionTrigger.MANUAL and cp.compactor == "extractive"
    assert cp.source_event_count == c.end_sequence and cp.source_first_event_id == "e1"
    assert cp.source_fingerprint == source_fingerprint(events[: c.end_sequence], "")
    assert cp.summary_bytes == len(c.summary.encode())
    assert cp.retained_event_count == 8 - c.end_sequence
    assert c.summarizer_usage == Usage(prompt_tokens=5)
    assert "src/billing/job.py" in c.summary
    checkpoint_json = checkpoint_to_json(cp)
    assert set(checkpoint_json["source"]) >= {"event_count", "fingerprint", "first_event_id", "last_event_id"}
    # The source events stay; the view is summary + kept tail.
    h = history_from_events(out)
    assert [e.id for e in out[:8]] == [e.id for e in events]
    assert h.previous_summary == c.summary and h.visible[0].sequence == c.first_kept_sequence


def test_nothing_to_compact_when_the_history_fits():
    plan = plan_compaction(history_from_events(long_history()), policy(), CompactionTrigger.MANUAL)
    assert isinstance(plan, NothingToCompact) and plan.reason.value == "FITS"


def test_fingerprint_changes_with_the_source():
    events = long_history()
    changed = [dataclasses.replace(events[0], content=user("other").content), *events[1:]]
    assert source_fingerprint(events[:3], "") != source_fingerprint(changed[:3], "")
    assert source_fingerprint(events[:3], "") != source_fingerprint(events[:3], "previous")
    assert source_fingerprint(events[:3], "") == source_fingerprint(list(events[:3]), "")


@pytest.mark.parametrize("summary", ["", "   ", 42])
def test_bad_summaries_are_structured_errors(summary):
    events = long_history()
    pol = policy(keep_recent_tokens=300)
    plan = plan_compaction(history_from_events(events), pol, CompactionTrigger.MANUAL)
    with pytest.raises(AgentCtxError) as exc:
        build_compaction_event(plan, SummaryResult(summary), pol, event_id="x", checkpoint_id="y", now=NOW)
    assert exc.value.reason in ("SUMMARY_EMPTY", "SUMMARY_MALFORMED") and exc.value.code is Code.FAILED_PRECONDITION


def test_oversized_summary_is_refused():
    events = long_history()
    pol = policy(keep_recent_tokens=300, max_summary_bytes=10)
    plan = plan_compaction(history_from_events(events), pol, CompactionTrigger.MANUAL)
    with pytest.raises(AgentCtxError) as exc:
        build_compaction_event(plan, SummaryResult("x" * 11), pol, event_id="x", checkpoint_id="y", now=NOW)
    assert exc.value.reason == "SUMMARY_TOO_LARGE"


def test_oversized_checkpoint_is_refused():
    events = long_history()
    pol = dataclasses.replace(policy(keep_recent_tokens=300), max_checkpoint_bytes=50)
    plan = plan_compaction(history_from_events(events), pol, CompactionTrigger.MANUAL)
    with pytest.raises(AgentCtxError) as exc:
        build_compaction_event(plan, SummaryResult("ok"), pol, event_id="x", checkpoint_id="y", now=NOW)
    assert exc.value.reason == "CHECKPOINT_TOO_LARGE"


def test_input_bound_summarizes_a_shorter_prefix():
    events = long_history()
    full = plan_compaction(history_from_events(events), policy(keep_recent_tokens=60), CompactionTrigger.MANUAL)
    bounded = plan_compaction(
        history_from_events(events), policy(keep_recent_tokens=60, max_input_bytes=3000), CompactionTrigger.MANUAL
    )
    assert isinstance(full, CompactionPlan) and isinstance(bounded, CompactionPlan)
    assert 0 < bounded.cut.index < full.cut.index and bounded.cut.kept_over_budget
    assert bounded.request.input_bytes <= 3000
    with pytest.raises(AgentCtxError) as exc:
        plan_compaction(history_from_events(events), policy(keep_recent_tokens=60, max_input_bytes=10), CompactionTrigger.MANUAL)
    assert exc.value.reason == "COMPACTOR_INPUT_TOO_LARGE"


def test_commit_refuses_when_another_compaction_committed():
    events = long_history()
    pol = policy(keep_recent_tokens=300)
    h = history_from_events(events)
    first = plan_compaction(h, pol, CompactionTrigger.MANUAL)
    second = plan_compaction(h, pol, CompactionTrigger.BACKGROUND)
    events = commit(events, first, pol)
    with pytest.raises(AgentCtxError) as exc:
        commit(events, second, pol)
    assert exc.value.code is Code.ABORTED and exc.value.reason == "COMPACTION_CONFLICT"


def test_commit_refuses_a_late_result_for_a_summarized_call():
    events = numbered([user("q " * 400), model("", [("c1", "slow")]), user("never mind " * 100), model("ok " * 100)])
    pol = policy(keep_recent_tokens=120)
    plan = plan_compaction(history_from_events(events), pol, CompactionTrigger.MANUAL)
    assert isinstance(plan, CompactionPlan) and "c1" in plan.summarized_call_ids
    late = numbered([tool("c1", "slow", "done")], start=5)
    with pytest.raises(AgentCtxError) as exc:
        commit([*events, *late], plan, pol)
    assert exc.value.reason == "COMPACTION_CONFLICT"


def test_appends_made_meanwhile_are_kept_and_counted():
    events = long_history()
    pol = policy(keep_recent_tokens=300)
    plan = plan_compaction(history_from_events(events), pol, CompactionTrigger.MANUAL)
    more = numbered([user("one more"), model("sure")], start=9)
    out = commit([*events, *more], plan, pol)
    entry = out[-1].compaction
    assert entry.checkpoint.retained_event_count == 10 - entry.end_sequence
    assert [e.id for e in history_from_events(out).visible][-2:] == ["e9", "e10"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_chained_compactions_never_orphan_a_kept_result(data):
    """pi #4570/#6832: chained compactions must never keep a tool result
    whose call was summarized; every source event stays stored."""
    events: list[Event] = []
    for _round in range(data.draw(st.integers(1, 5))):
        more = data.draw(histories(max_steps=12))
        events = [*events, *numbered(more, start=len(events) + 1)]
        events = [dataclasses.replace(e, id=f"e{e.sequence}") if not e.is_compaction else e for e in events]
        pol = policy(keep_recent_tokens=data.draw(st.integers(20, 2000)))
        h = history_from_events(events)
        plan = plan_compaction(h, pol, CompactionTrigger.THRESHOLD)
        if isinstance(plan, NothingToCompact):
            continue
        events = commit(events, plan, pol)
        view = history_from_events(events)
        assert tail_ok(list(view.visible), 0), "the kept tail holds a result without its call"
        assert view.previous_summary
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
