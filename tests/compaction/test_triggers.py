"""Trigger evaluation and the token pressure it reads."""

from __future__ import annotations

import pytest

from context_service.domain.compaction_rules.history import HistoryStats, history_from_events, history_stats
from context_service.domain.compaction_rules.policy import RESERVE_TOKENS, resolve
from context_service.domain.compaction_rules.triggers import Mode, evaluate, overflow_allowed
from context_service.domain.config import CompactionPolicy
from context_service.domain.model import (
    Checkpoint,
    Compaction,
    CompactionTrigger,
    Event,
    EventKind,
    Usage,
)
from tests.compaction.builders import model, numbered, user

ALL_ON = dict(context_window=100_000, background_tokens=50_000, event_threshold=10, turn_interval=3)


def decide(stats: HistoryStats, **policy):
    return evaluate(resolve(CompactionPolicy(**policy)), stats)


def test_defaults_match_the_anchors():
    p = resolve(CompactionPolicy())
    assert (p.reserve_tokens, p.keep_recent_tokens, p.timeout_s) == (16_384, 20_000, 5.0)
    assert (p.max_input_bytes, p.max_summary_bytes, p.max_checkpoint_bytes) == (16 << 20, 1 << 20, 2 << 20)
    assert p.overflow_keep_recent_tokens < p.keep_recent_tokens
    assert not p.enabled and p.compactor_name == "extractive"


def test_threshold_fires_at_window_minus_reserve():
    window = 100_000
    below = HistoryStats(window - RESERVE_TOKENS - 1, 1, 0)
    at = HistoryStats(window - RESERVE_TOKENS, 1, 0)
    assert decide(below, enabled=True, context_window=window).mode is Mode.NONE
    d = decide(at, enabled=True, context_window=window)
    assert (d.mode, d.trigger) == (Mode.SYNC, CompactionTrigger.THRESHOLD)


def test_background_fires_at_background_tokens():
    d = decide(HistoryStats(50_000, 1, 0), enabled=True, context_window=100_000, background_tokens=50_000)
    assert (d.mode, d.trigger) == (Mode.BACKGROUND, CompactionTrigger.BACKGROUND)


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        (HistoryStats(90_000, 50, 9), CompactionTrigger.THRESHOLD),
        (HistoryStats(60_000, 50, 9), CompactionTrigger.BACKGROUND),
        (HistoryStats(1_000, 50, 9), CompactionTrigger.EVENT_COUNT),
        (HistoryStats(1_000, 5, 9), CompactionTrigger.TURN_INTERVAL),
        (HistoryStats(1_000, 5, 1), CompactionTrigger.UNSPECIFIED),
    ],
)
def test_token_pressure_wins(stats, expected):
    assert decide(stats, enabled=True, **ALL_ON).trigger is expected


def test_disabled_turns_every_automatic_mode_off():
    stats = HistoryStats(10**9, 10**6, 10**6)
    assert decide(stats, enabled=False, **ALL_ON).mode is Mode.NONE
    assert not overflow_allowed(resolve(CompactionPolicy(enabled=False, **ALL_ON)))
    assert overflow_allowed(resolve(CompactionPolicy(enabled=True)))


def _compaction_event(seq: int, first_kept: int, usage: Usage) -> Event:
    checkpoint = Checkpoint(1, "cp", CompactionTrigger.MANUAL, 1, "a", "b", None, None, "f", 1, 10, 0, "extractive")
    return Event(
        id=f"c{seq}", author="compactor", sequence=seq, kind=EventKind.COMPACTION,
        compaction=Compaction(1, first_kept - 1, f"e{first_kept}", first_kept, "summary", checkpoint, usage),
    )


def test_summarizer_usage_is_never_the_agents_prompt_size():
    events = numbered([user("hi"), model("hello", usage=Usage(prompt_tokens=150_000)), user("next"), model("ok")])
    huge = Usage(prompt_tokens=900_000, output_tokens=900_000, total_tokens=1_800_000)
    h = history_from_events([*events, _compaction_event(5, 3, huge)])
    stats = history_stats(h, 4.0)
    # Neither the summarizer's usage nor the pre-compaction reply's prompt counts.
    assert stats.current_tokens < 100
    assert decide(stats, enabled=True, context_window=40_000).mode is Mode.NONE


def test_a_reply_after_the_compaction_reports_real_prompt_size():
    events = numbered([user("hi"), model("hello"), user("next")])
    after = numbered([model("ok", usage=Usage(prompt_tokens=30_000, output_tokens=100))], start=5)
    h = history_from_events([*events, _compaction_event(4, 3, Usage(prompt_tokens=1)), *after])
    assert history_stats(h, 4.0).current_tokens == 30_100
    assert history_stats(h, 4.0, reported_tokens=45_000).current_tokens == 45_000


def test_turns_are_counted_since_the_latest_compaction():
    events = numbered([user("a"), model("b"), user("c"), model("d")])
    h = history_from_events([*events, _compaction_event(5, 3, Usage()), *numbered([user("e")], start=6)])
    assert history_stats(h, 4.0).user_turns_since_compaction == 1
    assert history_stats(h, 4.0).visible_events == 3
