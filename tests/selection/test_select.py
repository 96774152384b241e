"""History selection: the compaction window, budgets and overflow modes,
calibration and the COMPRESS hook."""

from __future__ import annotations

import pytest

from agentctx_common.errors import ResourceExhausted
from context_service.domain import model as m
from context_service.domain.config import OverflowMode, SelectionPolicy
from context_service.domain.selection import (
    DEFAULT_SECRET_KEYS,
    content_record,
    effective_policy,
    event_record,
    finish_compression,
    select,
)
from context_service.domain.selection.records import SUMMARY_PREFIX
from context_service.domain.selection.tokens import byte_allowance, estimate
from tests.selection.builders import call, compaction, event, response, sequence, text

KEYS = DEFAULT_SECRET_KEYS


def records(events: list[m.Event]):  # type: ignore[no-untyped-def]
    return [event_record(e, KEYS) for e in events]


def inputs(*contents: m.Content):  # type: ignore[no-untyped-def]
    return [content_record(c, KEYS) for c in contents]


def policy(**kw) -> SelectionPolicy:  # type: ignore[no-untyped-def]
    return effective_policy(None, SelectionPolicy(**kw))


def seqs(selection) -> list[int]:  # type: ignore[no-untyped-def]
    return [r.sequence for r in selection.events]


def texts(selection) -> list[str]:  # type: ignore[no-untyped-def]
    return [p.text for c in selection.history for p in c.content.parts if p.text is not None]


def ten_messages() -> list[m.Event]:
    return sequence(*(text("user" if i % 2 == 0 else "model", f"message {i:02d}") for i in range(10)))


def test_unlimited_policy_keeps_everything() -> None:
    s = select(records(ten_messages()), inputs(text("user", "now")), policy())
    assert seqs(s) == list(range(1, 11))
    assert (s.events_seen, s.events_filtered, s.units_selected, s.units_dropped) == (10, 0, 10, 0)
    assert s.history_bytes == sum(r.body.size for r in s.events)


def test_truncate_keeps_the_newest_complete_units_in_order() -> None:
    recs = records(ten_messages())
    size = recs[0].body.size  # every message has the same size
    current = inputs(text("user", "now"))
    s = select(recs, current, policy(max_bytes=current[0].size + 3 * size + size // 2, overflow=OverflowMode.TRUNCATE))
    assert seqs(s) == [8, 9, 10]
    assert s.units_dropped == 7 and s.units_selected == 3


def test_truncate_never_splits_a_call_from_its_responses() -> None:
    events = sequence(
        text("user", "q"),
        call(("a", "f", {"x": "y" * 50}), ("b", "f", {})),
        response(("a", "f", {"r": 1})),
        response(("b", "f", {"r": 2})),
        text("model", "answer"),
    )
    recs = records(events)
    current = inputs(text("user", "now"))
    tail = recs[4].body.size + recs[3].body.size + current[0].size
    s = select(recs, current, policy(max_bytes=tail, overflow=OverflowMode.TRUNCATE))
    assert seqs(s) == [5]  # the unit 2-4 does not fit whole, so none of it is sent


def test_error_mode_reports_the_figures() -> None:
    recs = records(ten_messages())
    with pytest.raises(ResourceExhausted) as info:
        select(recs, inputs(text("user", "now")), policy(max_bytes=100))
    err = info.value
    assert err.reason == "CONTEXT_BUDGET_EXCEEDED"
    assert err.metadata["limit"] == "max_bytes" and err.metadata["allowed_bytes"] == "100"
    assert int(err.metadata["measured_bytes"]) > 100


def test_default_overflow_is_error() -> None:
    with pytest.raises(ResourceExhausted, match="history budget"):
        select(records(ten_messages()), [], policy(max_tokens=10))


def test_current_input_alone_over_budget_is_its_own_error() -> None:
    current = inputs(text("user", "x" * 500))
    with pytest.raises(ResourceExhausted) as info:
        select(records(ten_messages()), current, policy(max_bytes=100, overflow=OverflowMode.TRUNCATE))
    assert info.value.reason == "CURRENT_INPUT_EXCEEDS_BUDGET"


def test_a_call_answered_by_the_input_is_kept_with_it() -> None:
    events = [*ten_messages(), event(11, call(("a", "f", {"q": 1})))]
    recs = records(events)
    current = inputs(response(("a", "f", {"ok": True})))
    s = select(recs, current, policy(max_bytes=recs[10].body.size + current[0].size, overflow=OverflowMode.TRUNCATE))
    assert seqs(s) == [11]
    with pytest.raises(ResourceExhausted) as info:
        select(recs, current, policy(max_bytes=current[0].size + 1, overflow=OverflowMode.TRUNCATE))
    assert info.value.reason == "CURRENT_INPUT_EXCEEDS_BUDGET"


def test_token_budget_uses_the_rounded_up_estimate() -> None:
    assert estimate(9, 4.0) == 3 and estimate(0, 4.0) == 0
    assert byte_allowance(None, 3, 4.0) == 12
    assert byte_allowance(100, 3, 4.0) == 12
    assert byte_allowance(None, None, 4.0) is None
    for bpt in (0.3, 1.0, 2.7, 3.3333, 7.1):
        b = byte_allowance(None, 50, bpt)
        assert estimate(b, bpt) <= 50 < estimate(b + 1, bpt)


def test_partial_events_are_left_out_unless_asked_for() -> None:
    events = sequence(text("user", "a"), text("model", "chunk"), text("model", "full"))
    events[1] = event(2, text("model", "chunk"), partial=True)
    s = select(records(events), [], policy())
    assert seqs(s) == [1, 3] and s.events_filtered == 1


# --- compaction ---------------------------------------------------------------


def compacted_history() -> list[m.Event]:
    def msg(seq: int) -> m.Event:
        return event(seq, text("user", f"message {seq:02d}"))

    return [
        *(msg(i) for i in range(1, 7)),
        compaction(7, "old summary", first_kept=4),
        *(msg(i) for i in range(8, 12)),
        compaction(12, "new summary", first_kept=9),
        msg(13),
    ]


def test_compacted_session_is_latest_summary_then_the_kept_events() -> None:
    s = select(records(compacted_history()), inputs(text("user", "now")), policy())
    assert seqs(s) == [9, 10, 11, 13]
    assert s.summary is not None and s.summary.content.role == "user"
    assert texts(s)[0] == SUMMARY_PREFIX + "new summary"
    assert not any("old summary" in t for t in texts(s))
    assert s.compaction_sequence == 12 and s.events_seen == 4 and s.units_selected == 5


def test_truncation_drops_the_summary_first() -> None:
    recs = records(compacted_history())
    kept = sum(r.body.size for r in recs if r.sequence in (9, 10, 11, 13))
    s = select(recs, [], policy(max_bytes=kept, overflow=OverflowMode.TRUNCATE))
    assert s.summary is None and seqs(s) == [9, 10, 11, 13] and s.compaction_sequence == 0
    assert s.units_dropped == 1


def test_a_compaction_that_kept_nothing_shows_only_later_events() -> None:
    c = compaction(4, "all of it", first_kept=4)
    c = m.Event(**{**{f: getattr(c, f) for f in c.__slots__}, "compaction": m.Compaction(1, 3, "", 0, "all of it", c.compaction.checkpoint)})  # type: ignore[attr-defined]
    events = [*ten_messages()[:3], c, event(5, text("user", "new"))]
    s = select(records(events), [], policy())
    assert seqs(s) == [5] and s.summary is not None


# --- calibration ----------------------------------------------------------------


def replies_with_usage(ratio: float) -> list[m.Event]:
    events: list[m.Event] = []
    tokens = 1000  # a constant part (instructions, tools) that must cancel out
    total = 0
    for i in range(6):
        user = event(2 * i + 1, text("user", "u" * 80))
        events.append(user)
        total += event_record(user, KEYS).body.size
        reply = event(2 * i + 2, text("model", "m" * 40), usage=m.Usage(prompt_tokens=tokens + round(total / ratio)))
        events.append(reply)
        total += event_record(reply, KEYS).body.size
    return events


def test_calibration_uses_real_prompt_counts() -> None:
    s = select(records(replies_with_usage(2.5)), [], policy())
    assert s.calibrated and s.bytes_per_token == pytest.approx(2.5, rel=0.02)


def test_calibration_can_be_turned_off_and_needs_two_replies() -> None:
    s = select(records(replies_with_usage(2.5)), [], policy(disable_calibration=True))
    assert not s.calibrated and s.bytes_per_token == 4.0
    s = select(records(replies_with_usage(2.5)[:2]), [], policy(bytes_per_token=3.0))
    assert not s.calibrated and s.bytes_per_token == 3.0


def test_calibration_is_clamped() -> None:
    s = select(records(replies_with_usage(100.0)), [], policy())
    assert s.calibrated and s.bytes_per_token == 16.0


# --- COMPRESS ---------------------------------------------------------------------


def test_compress_asks_for_a_bounded_summary_of_what_was_dropped() -> None:
    recs = records(ten_messages())
    budget = sum(r.body.size for r in recs) // 2
    s = select(recs, [], policy(max_bytes=budget, overflow=OverflowMode.COMPRESS))
    assert s.pending is not None
    kept = seqs(s)
    assert kept == list(range(kept[0], 11))
    assert s.history_bytes <= budget * 3 // 4 + 1 < s.history_bytes + recs[kept[0] - 2].body.size
    assert [c.parts[0].text for c in s.pending.contents] == [f"message {i:02d}" for i in range(kept[0] - 1)]
    done = finish_compression(s, "x" * s.pending.max_summary_bytes, KEYS)
    assert done.compressed and done.pending is None and done.summary is not None
    assert done.history_bytes <= budget
    escaped = finish_compression(s, '"\n' * (s.pending.max_summary_bytes // 2), KEYS)
    assert escaped.history_bytes <= budget  # every character escaped still fits
    with pytest.raises(ResourceExhausted) as info:
        finish_compression(s, "x" * (s.pending.room + 1), KEYS)
    assert info.value.reason == "COMPRESSED_CONTEXT_OVER_BUDGET"


def test_compress_without_room_for_a_summary_is_an_error() -> None:
    recs = records(ten_messages())
    current = inputs(text("user", "x" * 60))
    with pytest.raises(ResourceExhausted) as info:
        select(recs, current, policy(max_bytes=current[0].size + 20, overflow=OverflowMode.COMPRESS))
    assert info.value.reason == "COMPRESSED_CONTEXT_OVER_BUDGET"


def test_compress_with_everything_fitting_needs_no_compressor() -> None:
    s = select(records(ten_messages()), [], policy(overflow=OverflowMode.COMPRESS))
    assert s.pending is None and not s.compressed


def test_a_memo_reuses_the_grouping_for_the_same_window_filter_and_input() -> None:
    recs = records(ten_messages())
    memo: dict = {}
    first = select(recs, inputs(text("user", "a")), policy(), memo=memo)
    again = select(recs, inputs(text("user", "different text, same ids")), policy(max_bytes=10_000), memo=memo)
    assert again.grouping is first.grouping and seqs(again) == seqs(first)
    other = select(recs, inputs(response(("x", "f", {}))), policy(), memo=memo)
    assert other.grouping is not first.grouping  # the input's response ids are part of the key
    assert select(recs, inputs(response(("x", "f", {}))), policy(), memo=memo).grouping is other.grouping
    assert select(recs, inputs(text("user", "b")), policy(), memo=memo).grouping is first.grouping


@pytest.mark.parametrize("bpt", [0.25, 1.0, 3.7, 4.0, 64.0, 1e300])
@pytest.mark.parametrize("max_tokens", [1, 7, 1000, 2**44, 2**62])
def test_byte_allowance_is_exact_and_bounded(bpt: float, max_tokens: int) -> None:
    """The largest byte count whose estimate fits, found in a few steps even
    for values validation refuses (1e300 once spun this loop for minutes)."""
    from context_service.domain.selection.tokens import byte_allowance, estimate

    b = byte_allowance(None, max_tokens, bpt)
    assert b is not None
    if bpt * max_tokens < 2**52:  # exactness holds where floats are exact
        assert estimate(b, bpt) <= max_tokens < estimate(b + 1, bpt)
