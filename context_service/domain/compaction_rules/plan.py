"""Planning a compaction and turning a summary into the COMPACTION event.

A plan records exactly what was read: the latest compaction it builds on,
the summarized events and their fingerprint, and the newest sequence seen.
The commit re-checks those facts atomically (``check_commit``); if any has
changed, the commit is refused with ABORTED and nothing is written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.checkpoint import SCHEMA_VERSION, check_checkpoint_size, source_fingerprint
from context_service.domain.compaction_rules.cut_point import Cut, KeepBudget, NoCut, find_cut
from context_service.domain.compaction_rules.history import History, is_user_turn_start
from context_service.domain.compaction_rules.policy import ResolvedPolicy
from context_service.domain.compaction_rules.sizing import Measure, event_tokens, measure_all
from context_service.domain.compaction_rules.summary import (
    Prepared,
    SummaryRequest,
    SummaryResult,
    build_request,
    prepare_for_compactor,
    target_bytes,
    validate_summary,
)
from context_service.domain.model import (
    Checkpoint,
    Compaction,
    CompactionTrigger,
    Event,
    EventKind,
)
from context_service.domain.retractions import retracted
from context_service.domain.selection.secrets import DEFAULT_SECRET_KEYS, SecretKeys

_NOTHING = Prepared(None, 0)

COMPACTOR_AUTHOR = "compactor"


@dataclass(frozen=True, slots=True)
class NothingToCompact:
    reason: NoCut
    kept_tokens: int
    kept_events: int


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    trigger: CompactionTrigger
    source: tuple[Event, ...]  # summarized, as stored
    kept: tuple[Event, ...]  # kept verbatim, as read
    cut: Cut
    keep_budget_tokens: int
    previous_summary: str
    based_on_compaction: int  # sequence of the latest compaction read, 0 if none
    read_last_sequence: int
    fingerprint: str
    request: SummaryRequest
    bytes_per_token: float
    generation: str = ""

    @property
    def start_sequence(self) -> int:
        return self.source[0].sequence

    @property
    def end_sequence(self) -> int:
        return self.source[-1].sequence

    @property
    def summarized_call_ids(self) -> frozenset[str]:
        return frozenset(
            fc.id for e in self.source if e.content is not None for fc in e.content.function_calls if fc.id
        )


def keep_budget(policy: ResolvedPolicy, trigger: CompactionTrigger) -> KeepBudget:
    if trigger is CompactionTrigger.OVERFLOW:
        # The provider refused the request: only the tighter token budget counts.
        return KeepBudget(policy.overflow_keep_recent_tokens)
    max_events = None
    if trigger is CompactionTrigger.EVENT_COUNT and policy.event_threshold is not None:
        # Keep well under the threshold, or the next turn would fire again.
        max_events = max(1, policy.event_threshold // 2)
    return KeepBudget(policy.keep_recent_tokens, policy.retain_recent_exchanges, max_events)


def choose_cut(
    history: History,
    policy: ResolvedPolicy,
    trigger: CompactionTrigger,
    measures: Sequence[Measure] | None = None,
) -> Cut:
    """Where ``trigger`` would cut the visible history (cheap with measures)."""
    return find_cut(history.visible, keep_budget(policy, trigger), policy.bytes_per_token, measures=measures)


def plan_compaction(
    history: History,
    policy: ResolvedPolicy,
    trigger: CompactionTrigger,
    *,
    session: str = "",
    instructions: str = "",
    keys: SecretKeys = DEFAULT_SECRET_KEYS,
    measures: Sequence[Measure] | None = None,
    prepared: Sequence[Prepared] | None = None,
) -> CompactionPlan | NothingToCompact:
    """The plan for ``trigger``. ``measures`` (of every visible event) and
    ``prepared`` (of the events before the cut, at least) spare the
    recomputation when the caller made them beforehand."""
    events = history.visible
    measures = measures if measures is not None else measure_all(events)
    budget = keep_budget(policy, trigger)
    cut = find_cut(events, budget, policy.bytes_per_token, measures=measures)
    if not cut.found:
        return NothingToCompact(cut.no_cut or NoCut.NO_VALID_CUT, cut.kept_tokens, cut.kept_events)
    if prepared is None or len(prepared) < cut.index:
        prepared = [prepare_for_compactor(e, keys) for e in events[: cut.index]]
    prepared = _unretracted(events, list(prepared[: cut.index]))
    fixed = len(history.previous_summary.encode()) + len(instructions.encode())
    total = fixed + sum(p.size for p in prepared)
    if total > policy.max_input_bytes:
        # Summarize the longest prefix whose input fits; the rest waits for
        # the next compaction, so an oversized history still makes progress.
        size, limit_index = fixed, 0
        for i, p in enumerate(prepared):
            size += p.size
            if size > policy.max_input_bytes:
                break
            limit_index = i + 1
        cut = find_cut(events, budget, policy.bytes_per_token, max_index=limit_index, measures=measures)
        if not cut.found:
            raise errors.input_too_large(total, policy.max_input_bytes)
        prepared = prepared[: cut.index]
    request = build_request(
        session,
        prepared,
        history.previous_summary,
        instructions,
        policy.max_summary_bytes,
        target_bytes(budget.tokens, policy.bytes_per_token, policy.max_summary_bytes),
    )
    source = tuple(events[: cut.index])
    return CompactionPlan(
        trigger=trigger,
        source=source,
        kept=tuple(events[cut.index :]),
        cut=cut,
        keep_budget_tokens=budget.tokens,
        previous_summary=history.previous_summary,
        based_on_compaction=history.latest_compaction_sequence,
        read_last_sequence=history.last_sequence,
        fingerprint=source_fingerprint(source, history.previous_summary, measures[: cut.index]),
        request=request,
        bytes_per_token=policy.bytes_per_token,
        generation=history.generation,
    )


def _unretracted(events: Sequence[Event], prepared: list[Prepared]) -> list[Prepared]:
    """``prepared`` (of ``events``' first ones) without the events a
    retraction anywhere in ``events`` takes back: the summarizer never sees
    them (retractions themselves have no content). They stay in the source
    range, as every event before the cut."""
    gone = retracted(events)
    if not gone:
        return prepared
    return [_NOTHING if e.id in gone else p for e, p in zip(events, prepared, strict=False)]


def _retained(kept: Sequence[Event], bytes_per_token: float) -> tuple[int, int, int]:
    complete = [e for e in kept if not e.partial]
    return (
        len(complete),
        sum(1 for e in complete if is_user_turn_start(e)),
        sum(event_tokens(e, bytes_per_token) for e in complete),
    )


def build_compaction_event(
    plan: CompactionPlan,
    result: SummaryResult,
    policy: ResolvedPolicy,
    *,
    event_id: str,
    checkpoint_id: str,
    now: dt.datetime,
) -> Event:
    """The COMPACTION event for a validated summary. Raises a structured
    error (nothing written) for a bad summary or an oversized checkpoint."""
    summary = validate_summary(result.summary, policy.max_summary_bytes, policy.compactor_name)
    kept_events, kept_turns, kept_tokens = _retained(plan.kept, plan.bytes_per_token)
    first, last = plan.source[0], plan.source[-1]
    checkpoint = Checkpoint(
        schema_version=SCHEMA_VERSION,
        checkpoint_id=checkpoint_id,
        trigger=plan.trigger,
        source_event_count=len(plan.source),
        source_first_event_id=first.id,
        source_last_event_id=last.id,
        source_first_time=first.create_time,
        source_last_time=last.create_time,
        source_fingerprint=plan.fingerprint,
        retained_event_count=kept_events,
        summary_bytes=len(summary.encode()),
        retained_user_turns=kept_turns,
        compactor=policy.compactor_name,
        retained_tokens=kept_tokens,
    )
    check_checkpoint_size(checkpoint, policy.max_checkpoint_bytes)
    first_kept = plan.kept[0] if plan.kept else None
    compaction = Compaction(
        start_sequence=plan.start_sequence,
        end_sequence=plan.end_sequence,
        first_kept_event_id=first_kept.id if first_kept else "",
        # With nothing kept, everything after the range is shown verbatim.
        first_kept_sequence=first_kept.sequence if first_kept else plan.end_sequence + 1,
        summary=summary,
        checkpoint=checkpoint,
        summarizer_usage=result.usage,
    )
    return Event(
        id=event_id,
        author=COMPACTOR_AUTHOR,
        kind=EventKind.COMPACTION,
        compaction=compaction,
        create_time=now,
        turn_complete=False,
    )


def check_commit(
    plan: CompactionPlan,
    event: Event,
    latest_compaction_now: int,
    appended: Sequence[Event],
    *,
    generation_now: str = "",
    source_ids_now: Sequence[tuple[int, str]] | None = None,
) -> Event:
    """Inside the commit transaction: refuse (ABORTED, nothing written) when
    the session is another incarnation, the summarized range no longer holds
    the events that were read (``source_ids_now``: (sequence, id) of the
    MESSAGE events in start..end), another compaction committed since the
    plan was read, or a result for a summarized call arrived meanwhile (it
    would be kept without its call). Returns the event with retained counts
    as of the commit; events appended meanwhile stay and are kept verbatim."""
    if generation_now != plan.generation:
        raise errors.conflict("the session was deleted and created again")
    if source_ids_now is not None and list(source_ids_now) != [(e.sequence, e.id) for e in plan.source]:
        raise errors.conflict("the summarized range changed", start_sequence=plan.start_sequence)
    if latest_compaction_now != plan.based_on_compaction:
        raise errors.conflict(
            "another compaction committed",
            expected_compaction_sequence=plan.based_on_compaction,
            actual_compaction_sequence=latest_compaction_now,
        )
    summarized = plan.summarized_call_ids
    for e in appended:
        if e.content is not None and any(fr.id in summarized for fr in e.content.function_responses):
            raise errors.conflict("a result for a summarized call arrived", event_sequence=e.sequence)
    if not appended or event.compaction is None:
        return event
    messages = [e for e in appended if not e.is_compaction]
    kept_events, kept_turns, kept_tokens = _retained((*plan.kept, *messages), plan.bytes_per_token)
    checkpoint = dataclasses.replace(
        event.compaction.checkpoint,
        retained_event_count=kept_events,
        retained_user_turns=kept_turns,
        retained_tokens=kept_tokens,
    )
    return dataclasses.replace(event, compaction=dataclasses.replace(event.compaction, checkpoint=checkpoint))
