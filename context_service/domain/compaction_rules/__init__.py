"""Compaction, pure: policy defaults, triggers, the cut point, the plan and
checkpoint, the extractive compactor and summary bounds. No I/O, no grpc.

The non-pure orchestration (compactor runners, the service, the background
worker) lives in ``context_service.compaction``.
"""

from context_service.domain.compaction_rules.cut_point import Cut, KeepBudget, NoCut, find_cut
from context_service.domain.compaction_rules.history import History, HistoryStats, history_from_events, history_stats
from context_service.domain.compaction_rules.plan import (
    COMPACTOR_AUTHOR,
    CompactionPlan,
    NothingToCompact,
    build_compaction_event,
    check_commit,
    plan_compaction,
)
from context_service.domain.compaction_rules.policy import ResolvedPolicy, resolve
from context_service.domain.compaction_rules.summary import SummaryRequest, SummaryResult
from context_service.domain.compaction_rules.triggers import Decision, Mode, evaluate

__all__ = [
    "COMPACTOR_AUTHOR",
    "CompactionPlan",
    "Cut",
    "Decision",
    "History",
    "HistoryStats",
    "KeepBudget",
    "Mode",
    "NoCut",
    "NothingToCompact",
    "ResolvedPolicy",
    "SummaryRequest",
    "SummaryResult",
    "build_compaction_event",
    "check_commit",
    "evaluate",
    "find_cut",
    "history_from_events",
    "history_stats",
    "plan_compaction",
    "resolve",
]
