"""The cut point: unit cases for each rule, and hypothesis properties over
random histories checked against a slow reference statement of the rules."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_service.domain.compaction_rules.cut_point import KeepBudget, NoCut, find_cut, valid_cuts
from context_service.domain.compaction_rules.history import is_user_turn_start
from context_service.domain.compaction_rules.sizing import event_tokens
from tests.compaction.builders import histories, model, numbered, tool, user
from tests.compaction.reference import pending_call_indexes, tail_ok

BPT = 4.0


def tokens(events) -> int:
    return sum(event_tokens(e, BPT) for e in events)


def test_history_that_fits_is_not_cut():
    events = numbered([user("hello"), model("hi")])
    cut = find_cut(events, KeepBudget(10_000), BPT)
    assert not cut.found and cut.no_cut is NoCut.FITS


def test_keeps_longest_tail_within_budget():
    events = numbered([user("a" * 400), model("b" * 400), user("c" * 400), model("d" * 400)])
    per_event = event_tokens(events[0], BPT)
    cut = find_cut(events, KeepBudget(2 * per_event + 5), BPT)
    assert cut.index == 2 and not cut.kept_over_budget
    assert cut.kept_tokens == tokens(events[2:])


def test_tail_never_starts_with_tool_response():
    events = numbered([user("x" * 800), model("", [("c1", "read_file")]), tool("c1", "read_file", "y" * 40), model("done")])
    budget = tokens(events[2:])  # the budget would start the tail at the tool result
    cut = find_cut(events, KeepBudget(budget), BPT)
    assert cut.index == 3 and not cut.kept_over_budget  # forward past the pair, within budget
    cut = find_cut(events[:3], KeepBudget(tokens(events[2:3])), BPT)
    assert cut.index == 1 and cut.kept_over_budget  # nothing after the pair: back to the call


def test_exchanges_floor_keeps_recent_user_turns():
    events = numbered([user("a" * 400), model("b" * 400), user("c" * 400), model("d" * 400), user("e"), model("f")])
    cut = find_cut(events, KeepBudget(1, exchanges=2), BPT)
    assert cut.index == 2


def test_too_few_exchanges_keeps_everything():
    events = numbered([user("a" * 4000), model("b" * 4000)])
    cut = find_cut(events, KeepBudget(1, exchanges=2), BPT)
    assert not cut.found and cut.no_cut is NoCut.TOO_FEW_EXCHANGES


def test_max_events_limits_the_tail():
    events = numbered([user("a"), model("b"), user("c"), model("d"), user("e"), model("f")])
    cut = find_cut(events, KeepBudget(10_000, max_events=2), BPT)
    assert cut.index == 4


def test_max_index_caps_what_is_summarized():
    events = numbered([user("a" * 400), model("b" * 400), user("c" * 400), model("d" * 400)])
    cut = find_cut(events, KeepBudget(1), BPT, max_index=2)
    assert cut.index == 2 and cut.kept_over_budget


def test_in_flight_calls_of_the_newest_step_stay():
    events = numbered([user("a" * 4000), model("b" * 4000), user("run it"), model("", [("c1", "build")])])
    cut = find_cut(events, KeepBudget(1), BPT)
    assert cut.found and cut.index <= 3


def test_partially_answered_parallel_calls_stay_together():
    events = numbered([user("a" * 4000), model("", [("c1", "x"), ("c2", "y")]), tool("c1", "x", "z" * 4000)])
    cut = find_cut(events, KeepBudget(1), BPT)
    assert cut.index == 1  # c2 still runs: its call is kept, and c1's result with it


def test_a_trailing_orphan_response_is_summarized_with_everything():
    events = numbered([user("a" * 4000), model("b" * 400), tool("ghost", "lost", "c" * 400)])
    cut = find_cut(events, KeepBudget(1), BPT)
    assert cut.index == len(events) and cut.kept_events == 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=histories(), budget=st.integers(1, 3000), exchanges=st.none() | st.integers(1, 4))
def test_cut_obeys_every_rule(events, budget, exchanges):
    cut = find_cut(events, KeepBudget(budget, exchanges=exchanges), BPT)
    kept = events[cut.index :]
    assert cut.kept_tokens == tokens(kept)
    if not cut.found:
        return
    assert tail_ok(events, cut.index), "the kept tail breaks a tool-pair or pending-call rule"
    assert all(i >= cut.index for i in pending_call_indexes(events))
    if not cut.kept_over_budget:
        assert cut.kept_tokens <= budget
        # The longest such tail: no valid, in-budget cut keeps more.
        assert not any(tail_ok(events, c) and tokens(events[c:]) <= budget for c in range(1, cut.index))
    if exchanges is not None:
        assert sum(1 for e in kept if is_user_turn_start(e)) >= exchanges


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=histories(min_steps=1), budget=st.integers(1, 3000))
def test_a_valid_cut_is_found_whenever_one_exists(events, budget):
    cut = find_cut(events, KeepBudget(budget), BPT)
    if cut.found or cut.no_cut is NoCut.FITS:
        return
    assert not any(tail_ok(events, c) for c in range(1, len(events) + 1)), "a valid cut existed but none was found"


@settings(max_examples=200, deadline=None)
@given(events=histories())
def test_linear_validity_matches_the_reference(events):
    valid = valid_cuts(events)
    assert valid == [tail_ok(events, c) for c in range(len(events) + 1)]
