"""The compaction service: load, decide, summarize under a deadline,
commit atomically. Every entry point either commits exactly one
COMPACTION event or changes nothing.

Entry points (the Generate flow calls the first three):

- ``maybe_compact_at_turn_boundary``: evaluates the triggers; threshold,
  event count and turn interval compact now, background enqueues a durable
  job (at most one pending per session).
- ``compact_for_overflow``: after a provider context-overflow error, with
  the tighter keep-recent budget; does nothing when compaction is disabled.
- ``compact_now``: manual (CompactSession), with optional instructions.
- ``run_background``: what a background job does.
- ``compressor``: selection's overflow COMPRESS, through the same compactors.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentctx_common.errors import Aborted, AgentCtxError, FailedPrecondition
from agentctx_common.reasons import Reason
from agentctx_common.spans import recording_span
from context_service.compaction import telemetry
from context_service.compaction.compactors import CompactionCall, Compactor, ExtractiveCompactor, run
from context_service.compaction.compress import SessionCompressor
from context_service.compaction.slices import prepared
from context_service.compaction.views import Views
from context_service.domain.compaction_rules.history import History, history_stats
from context_service.domain.compaction_rules.plan import (
    NothingToCompact,
    build_compaction_event,
    choose_cut,
    plan_compaction,
)
from context_service.domain.compaction_rules.policy import ResolvedPolicy, resolve
from context_service.domain.compaction_rules.sizing import Measure
from context_service.domain.compaction_rules.triggers import Mode, evaluate, overflow_allowed
from context_service.domain.config import CompactionPolicy, CompactorKind, ContextConfig, overlay
from context_service.domain.model import CompactionTrigger, Event, SessionKey
from context_service.domain.selection.policy import effective_policy, secret_keys
from context_service.ports import CompactionJobs, CompactionStore, SessionStore

# Automatic compactions re-plan this many times when another commit got in
# first; manual ones report the conflict (ABORTED) to their caller.
AUTOMATIC_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    compacted: bool
    trigger: CompactionTrigger = CompactionTrigger.UNSPECIFIED
    event: Event | None = None  # the stored COMPACTION event
    kept_events: int = 0
    kept_tokens: int = 0
    kept_over_budget: bool = False
    # Why nothing was committed: DISABLED, NOT_DUE, FITS, NO_VALID_CUT,
    # TOO_FEW_EXCHANGES, or BACKGROUND_SCHEDULED / BACKGROUND_PENDING.
    skipped: str = ""

    @property
    def background_scheduled(self) -> bool:
        return self.skipped == "BACKGROUND_SCHEDULED"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Compactors:
    """The compactor for a policy."""

    def __init__(
        self, *, extractive: Compactor | None = None, model: Compactor | None = None, remote: Compactor | None = None
    ) -> None:
        self._by_kind: dict[CompactorKind, Compactor | None] = {
            CompactorKind.EXTRACTIVE: extractive or ExtractiveCompactor(),
            CompactorKind.MODEL: model,
            CompactorKind.REMOTE: remote,
        }

    def get(self, kind: CompactorKind) -> Compactor:
        compactor = self._by_kind.get(kind)
        if compactor is None:
            raise FailedPrecondition(
                f"the {kind.value.lower()} compactor is not available on this server",
                reason=Reason.COMPACTOR_NOT_ALLOWED,
            )
        return compactor


class CompactionService:
    def __init__(
        self,
        sessions: SessionStore,
        store: CompactionStore,
        compactors: Compactors,
        *,
        jobs: CompactionJobs | None = None,
        defaults: ContextConfig = ContextConfig(),
        default_model: str = "",
        clock: Callable[[], dt.datetime] = _utcnow,
        on_enqueued: Callable[[], None] | None = None,
    ) -> None:
        self._sessions = sessions
        self._store = store
        self._views = Views(store)
        self._compactors = compactors
        self._jobs = jobs
        self._defaults = defaults
        self._default_model = default_model
        self._clock = clock
        # Called after a job is enqueued (the local worker's wake-up).
        self.on_enqueued = on_enqueued

    # --- configuration --------------------------------------------------

    async def _config(self, key: SessionKey) -> ContextConfig:
        record = await self._sessions.get_session(key)
        return overlay(self._defaults, record.config)

    def _policy(self, config: ContextConfig, override: CompactionPolicy | None = None) -> ResolvedPolicy:
        selection = effective_policy(config.selection, None)
        return resolve(overlay(config.compaction, override), bytes_per_token=selection.bytes_per_token)

    # --- entry points ---------------------------------------------------

    async def compact_now(
        self,
        key: SessionKey,
        *,
        instructions: str = "",
        override: CompactionPolicy | None = None,
        remaining: float | None = None,
    ) -> CompactionOutcome:
        """Manual compaction; works whether or not automatic compaction is
        enabled. A conflict with another commit is ABORTED."""
        config = await self._config(key)
        policy = self._policy(config, override)
        return await self._compact(key, config, policy, CompactionTrigger.MANUAL, instructions, remaining, attempts=1)

    async def maybe_compact_at_turn_boundary(
        self,
        key: SessionKey,
        *,
        reported_tokens: int | None = None,
        remaining: float | None = None,
        config: ContextConfig | None = None,
    ) -> CompactionOutcome:
        """``reported_tokens``: the real prompt+output size of the model call
        that just ended, when the caller has it. ``config``: the session's
        effective config when the caller has it (a Generate turn's built
        context does), saving the session read; the view is then the one
        read of the check (one query for the row and its latest compaction,
        one for the events appended since the cached view)."""
        config = config if config is not None else await self._config(key)
        policy = self._policy(config)
        if not policy.enabled:
            return CompactionOutcome(False, skipped="DISABLED")
        view = await self._views.load(key)
        history, measures = view.history, view.measures
        decision = evaluate(policy, history_stats(history, policy.bytes_per_token, reported_tokens, measures=measures))
        if decision.mode is Mode.NONE:
            return CompactionOutcome(False, skipped="NOT_DUE")
        if decision.mode is Mode.BACKGROUND:
            return await self._enqueue(key, decision.trigger)
        return await self._compact(
            key, config, policy, decision.trigger, "", remaining,
            attempts=AUTOMATIC_ATTEMPTS, history=history, measures=measures,
        )

    async def compact_for_overflow(self, key: SessionKey, *, remaining: float | None = None) -> CompactionOutcome:
        """Before Generate's single retry after a context-window overflow."""
        config = await self._config(key)
        policy = self._policy(config)
        if not overflow_allowed(policy):
            return CompactionOutcome(False, CompactionTrigger.OVERFLOW, skipped="DISABLED")
        return await self._compact(key, config, policy, CompactionTrigger.OVERFLOW, "", remaining, attempts=AUTOMATIC_ATTEMPTS)

    async def run_background(self, key: SessionKey) -> CompactionOutcome:
        """One background job: compacts if the session is still over its
        background threshold and compaction is still enabled."""
        config = await self._config(key)
        policy = self._policy(config)
        if not policy.enabled:
            return CompactionOutcome(False, CompactionTrigger.BACKGROUND, skipped="DISABLED")
        view = await self._views.load(key)
        history, measures = view.history, view.measures
        stats = history_stats(history, policy.bytes_per_token, measures=measures)
        if policy.background_tokens is None or stats.current_tokens < policy.background_tokens:
            return CompactionOutcome(False, CompactionTrigger.BACKGROUND, skipped="NOT_DUE")
        return await self._compact(
            key, config, policy, CompactionTrigger.BACKGROUND, "", None,
            attempts=AUTOMATIC_ATTEMPTS, history=history, measures=measures,
        )

    async def compressor(
        self, key: SessionKey, config: ContextConfig, *, remaining: float | None = None
    ) -> SessionCompressor:
        """Selection's COMPRESS for one BuildContext call on ``key`` whose
        effective config is ``config``."""
        policy = self._policy(config)
        deadline = time.monotonic() + remaining if remaining is not None else math.inf
        model = policy.model or config.model or self._default_model
        keys = secret_keys(effective_policy(config.selection, None))
        return SessionCompressor(self._compactors.get(policy.compactor), CompactionCall(key, model, deadline), policy, keys)

    async def _enqueue(self, key: SessionKey, trigger: CompactionTrigger) -> CompactionOutcome:
        if self._jobs is None:
            return CompactionOutcome(False, trigger, skipped="NOT_DUE")
        created = await self._jobs.enqueue(key, trigger)
        if created and self.on_enqueued is not None:
            self.on_enqueued()
        telemetry.record(trigger.value, "", "SCHEDULED" if created else "ALREADY_PENDING")
        return CompactionOutcome(False, trigger, skipped="BACKGROUND_SCHEDULED" if created else "BACKGROUND_PENDING")

    # --- the one way to compact -------------------------------------------

    async def _compact(
        self,
        key: SessionKey,
        config: ContextConfig,
        policy: ResolvedPolicy,
        trigger: CompactionTrigger,
        instructions: str,
        remaining: float | None,
        *,
        attempts: int,
        history: History | None = None,
        measures: Sequence[Measure] | None = None,
    ) -> CompactionOutcome:
        compactor = self._compactors.get(policy.compactor)
        keys = secret_keys(effective_policy(config.selection, None))
        model = policy.model or config.model or self._default_model
        deadline = time.monotonic() + remaining if remaining is not None else math.inf
        # Errors are recorded by code and reason only: a compactor's message
        # is not ours to export.
        with recording_span(telemetry.tracer, "compaction") as span:
            span.set_attribute("compaction.trigger", trigger.value)
            for attempt in range(1, attempts + 1):
                if history is None or measures is None:
                    view = await self._views.load(key)
                    history, measures = view.history, view.measures
                cut = choose_cut(history, policy, trigger, measures)
                prepared_events = await prepared(history.visible[: cut.index], keys) if cut.found else []
                plan = plan_compaction(
                    history, policy, trigger, session=key.name, instructions=instructions, keys=keys,
                    measures=measures, prepared=prepared_events,
                )
                if isinstance(plan, NothingToCompact):
                    telemetry.record(trigger.value, compactor.name, plan.reason.value, kept_events=plan.kept_events)
                    return CompactionOutcome(
                        False, trigger, kept_events=plan.kept_events, kept_tokens=plan.kept_tokens,
                        skipped=plan.reason.value,
                    )
                try:
                    result = await run(compactor, plan.request, CompactionCall(key, model, deadline), policy)
                    event = build_compaction_event(
                        plan, result, policy,
                        event_id=f"compaction-{uuid.uuid4().hex}", checkpoint_id=uuid.uuid4().hex, now=self._clock(),
                    )
                    stored = await self._store.commit(key, plan, event)
                except Aborted as exc:
                    telemetry.record(trigger.value, compactor.name, exc.reason, attempt=attempt)
                    if attempt == attempts or exc.reason != Reason.COMPACTION_CONFLICT:
                        raise
                    history = None  # someone else committed: plan again on what is there now
                    measures = None
                    continue
                except asyncio.CancelledError:
                    telemetry.record(trigger.value, compactor.name, "CANCELLED")
                    raise
                except AgentCtxError as exc:
                    telemetry.record(trigger.value, compactor.name, exc.reason)
                    raise
                assert stored.compaction is not None
                self._views.committed(key, plan, tuple(measures), stored)
                checkpoint = stored.compaction.checkpoint
                usage = stored.compaction.summarizer_usage
                telemetry.record(
                    trigger.value, compactor.name, "COMMITTED",
                    source_events=checkpoint.source_event_count, kept_events=checkpoint.retained_event_count,
                    kept_tokens=checkpoint.retained_tokens, summary_bytes=checkpoint.summary_bytes,
                    summarizer_tokens=usage.total_tokens if usage else 0, sequence=stored.sequence,
                )
                return CompactionOutcome(
                    True, trigger, stored, kept_events=checkpoint.retained_event_count,
                    kept_tokens=checkpoint.retained_tokens, kept_over_budget=plan.cut.kept_over_budget,
                )
        raise AssertionError("unreachable")  # pragma: no cover
