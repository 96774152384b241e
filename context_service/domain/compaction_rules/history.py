"""The part of a session compaction works on: the latest compaction entry
and the events it left visible.

Built contexts show "latest summary + events from its first_kept_sequence
on"; compaction plans over exactly the same view, so what it summarizes is
what the model would otherwise have seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from context_service.domain.compaction_rules.sizing import Measure, measure_all, summary_tokens, tokens
from context_service.domain.model import Event


@dataclass(frozen=True, slots=True)
class History:
    """``visible`` holds MESSAGE events with sequence >= the latest
    compaction's first_kept_sequence, in sequence order (partial chunks
    included; they count zero tokens)."""

    visible: tuple[Event, ...]
    latest_compaction: Event | None = None
    last_sequence: int = 0
    # Opaque identity of the session's incarnation: a session deleted and
    # created again under the same name is another session.
    generation: str = ""

    @property
    def previous_summary(self) -> str:
        c = self.latest_compaction
        return c.compaction.summary if c is not None and c.compaction is not None else ""

    @property
    def latest_compaction_sequence(self) -> int:
        return self.latest_compaction.sequence if self.latest_compaction is not None else 0


def history_from_events(events: Iterable[Event]) -> History:
    """The view of a complete, sequence-ordered event list (tests, small
    sessions). Stores build it with two bounded queries instead."""
    ordered = sorted(events, key=lambda e: e.sequence)
    latest = None
    for e in ordered:
        if e.is_compaction and e.compaction is not None:
            latest = e
    first_kept = latest.compaction.first_kept_sequence if latest is not None and latest.compaction else 0
    visible = tuple(e for e in ordered if not e.is_compaction and e.sequence >= first_kept)
    return History(visible, latest, ordered[-1].sequence if ordered else 0)


def is_user_turn_start(e: Event) -> bool:
    """A user's own input (not a tool result): it opens an exchange."""
    if e.partial or e.is_compaction or e.content is None or e.content.role != "user":
        return False
    return not e.content.function_responses and any(not p.thought for p in e.content.parts)


@dataclass(frozen=True, slots=True)
class HistoryStats:
    """What the triggers look at. ``current_tokens`` never includes a
    summarizer's own usage: only agent model calls and estimates count."""

    current_tokens: int
    visible_events: int
    user_turns_since_compaction: int


def history_stats(
    h: History,
    bytes_per_token: float,
    reported_tokens: int | None = None,
    *,
    measures: Sequence[Measure] | None = None,
) -> HistoryStats:
    """Token pressure of the visible history.

    ``reported_tokens`` is a real prompt+output count the caller knows for
    the current context (Generate passes the call it just made). Otherwise
    the newest agent reply after the latest compaction supplies one, plus
    estimates for what came after it; the estimate of the whole view is the
    floor. Compaction entries' summarizer usage is never read.
    """
    per_event = [tokens(m, bytes_per_token) for m in (measures if measures is not None else measure_all(h.visible))]
    estimate = sum(per_event) + summary_tokens(h.previous_summary, bytes_per_token)
    measured = reported_tokens or 0
    if reported_tokens is None:
        after = 0
        for e, event_tokens in zip(reversed(h.visible), reversed(per_event), strict=False):
            usage = e.usage
            if usage is not None and usage.prompt_tokens > 0 and e.sequence > h.latest_compaction_sequence:
                measured = usage.prompt_tokens + usage.output_tokens + after
                break
            after += event_tokens
    turns = sum(
        1 for e in h.visible if e.sequence > h.latest_compaction_sequence and is_user_turn_start(e)
    )
    visible_events = sum(1 for e in h.visible if not e.partial)
    return HistoryStats(max(estimate, measured), visible_events, turns)
