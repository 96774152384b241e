"""Which automatic compaction, if any, is due at a turn boundary.

Token pressure wins when several triggers fire: threshold (synchronous,
the next request would not fit), then background (a job compacts while the
agent goes on), then the event count, then the turn interval. A disabled
policy never triggers anything automatic, overflow recovery included.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from context_service.domain.compaction_rules.history import HistoryStats
from context_service.domain.compaction_rules.policy import ResolvedPolicy
from context_service.domain.model import CompactionTrigger


class Mode(str, enum.Enum):
    NONE = "NONE"
    SYNC = "SYNC"  # compact now, before the turn ends
    BACKGROUND = "BACKGROUND"  # enqueue a durable job


@dataclass(frozen=True, slots=True)
class Decision:
    mode: Mode
    trigger: CompactionTrigger = CompactionTrigger.UNSPECIFIED

    @property
    def due(self) -> bool:
        return self.mode is not Mode.NONE


NOTHING = Decision(Mode.NONE)


def evaluate(policy: ResolvedPolicy, stats: HistoryStats) -> Decision:
    if not policy.enabled:
        return NOTHING
    window = policy.context_window
    if window is not None and stats.current_tokens + policy.reserve_tokens >= window:
        return Decision(Mode.SYNC, CompactionTrigger.THRESHOLD)
    if policy.background_tokens is not None and stats.current_tokens >= policy.background_tokens:
        return Decision(Mode.BACKGROUND, CompactionTrigger.BACKGROUND)
    if policy.event_threshold is not None and stats.visible_events >= policy.event_threshold:
        return Decision(Mode.SYNC, CompactionTrigger.EVENT_COUNT)
    if policy.turn_interval is not None and stats.user_turns_since_compaction >= policy.turn_interval:
        return Decision(Mode.SYNC, CompactionTrigger.TURN_INTERVAL)
    return NOTHING


def overflow_allowed(policy: ResolvedPolicy) -> bool:
    """Overflow recovery is automatic compaction too (pi #6472: the overflow
    path ignored enabled=false)."""
    return policy.enabled
