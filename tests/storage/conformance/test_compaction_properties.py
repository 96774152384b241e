"""Hypothesis over random interleavings of appends, plans and commits on
both backends, checked against a model of what must happen:

- no event is ever lost or changed;
- a commit is refused (ABORTED, COMPACTION_CONFLICT) exactly when another
  compaction committed since its plan was read, or a result for a call it
  summarized arrived meanwhile; otherwise it commits;
- the kept tail never holds a tool result without its call;
- BuildContext after a compaction shows the newest summary and the kept
  events, within the keep budget unless the cut said otherwise.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_common.errors import AgentCtxError, Code
from context_service.domain import selection as sel
from context_service.domain.compaction_rules.extractive import summarize
from context_service.domain.compaction_rules.plan import CompactionPlan, build_compaction_event, plan_compaction
from context_service.domain.compaction_rules.policy import resolve
from context_service.domain.compaction_rules.sizing import event_tokens
from context_service.domain.compaction_rules.summary import SummaryResult
from context_service.domain.config import CompactionPolicy, ContextConfig
from context_service.domain.model import CompactionTrigger, Event, SessionKey
from context_service.storage.factory import Backend
from tests.compaction.builders import step
from tests.compaction.reference import tail_ok

NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
_counter = itertools.count()

_append = st.tuples(st.just("append"), st.lists(step(_counter), min_size=1, max_size=4).map(lambda s: [e for x in s for e in x]))
operations = st.tuples(
    _append,  # start with some history
    st.lists(
        st.one_of(
            _append,
            st.tuples(st.just("plan"), st.integers(10, 300)),
            st.tuples(st.just("commit"), st.integers(0, 5)),
        ),
        min_size=3,
        max_size=16,
    ),
).map(lambda t: [t[0], *t[1]])


def _late_result(plan: CompactionPlan, stored: list[Event]) -> bool:
    calls = plan.summarized_call_ids
    return any(
        e.content is not None and any(fr.id in calls for fr in e.content.function_responses)
        for e in stored
        if e.sequence > plan.read_last_sequence
    )


@settings(
    max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=operations)
async def test_random_interleavings_keep_every_invariant(stores: Backend, ops):
    key = SessionKey("app1", "u1", uuid.uuid4().hex)
    await stores.sessions.create_session(key, state={}, config=ContextConfig())
    appended: list[Event] = []  # every message event, as stored
    plans: list[tuple[CompactionPlan, int]] = []  # (plan, keep budget)
    latest_compaction = 0
    committed = 0
    for op, arg in ops:
        if op == "append":
            for e in arg:
                e = dataclasses.replace(e, id=f"m{len(appended)}")
                appended.append((await stores.sessions.append_event(key, e)).event)
        elif op == "plan":
            policy = resolve(CompactionPolicy(keep_recent_tokens=arg))
            plan = plan_compaction(await stores.compactions.load_history(key), policy, CompactionTrigger.MANUAL)
            if isinstance(plan, CompactionPlan):
                plans.append((plan, arg))
        elif plans:
            plan, keep = plans.pop(arg % len(plans))
            policy = resolve(CompactionPolicy(keep_recent_tokens=keep))
            text = summarize(plan.request.events, plan.previous_summary, 2048, policy.max_summary_bytes)
            event = build_compaction_event(
                plan, SummaryResult(text), policy, event_id=f"c{uuid.uuid4().hex}", checkpoint_id="cp", now=NOW
            )
            stored_before = await stores.sessions.list_events(key)
            expect_conflict = plan.based_on_compaction != latest_compaction or _late_result(plan, stored_before)
            try:
                done = await stores.compactions.commit(key, plan, event)
            except AgentCtxError as exc:
                assert expect_conflict, f"unexpected refusal: {exc.reason}"
                assert exc.code is Code.ABORTED and exc.reason == "COMPACTION_CONFLICT"
                assert await stores.sessions.list_events(key) == stored_before  # nothing changed
            else:
                assert not expect_conflict, "a conflicting compaction committed"
                latest_compaction = done.sequence
                committed += 1
                await _check_view(stores, key, plan, keep, done)
        # No event is lost or changed, whatever happened.
        stored = await stores.sessions.list_events(key)
        assert [e for e in stored if not e.is_compaction] == appended
        assert sum(e.is_compaction for e in stored) == committed


async def _check_view(stores: Backend, key: SessionKey, plan: CompactionPlan, keep: int, done: Event) -> None:
    history = await stores.compactions.load_history(key)
    assert history.latest_compaction == done
    kept_then = [e for e in history.visible if e.sequence <= plan.read_last_sequence]
    assert tail_ok(kept_then, 0), "a kept tool result lost its call"
    # BuildContext's selection over the stored events: summary + kept tail.
    records = [sel.event_record(e, sel.DEFAULT_SECRET_KEYS) for e in await stores.sessions.list_events(key)]
    selection = sel.select(records, [], sel.DEFAULT_POLICY)
    assert selection.summary is not None and selection.compaction_sequence == done.sequence
    assert all(r.sequence >= done.compaction.first_kept_sequence for r in selection.events)
    if not plan.cut.kept_over_budget:
        assert sum(event_tokens(e, 4.0) for e in kept_then) <= keep
