"""Selection units: calls and their responses are never separated."""

from __future__ import annotations

from context_service.domain.selection import DEFAULT_SECRET_KEYS, event_record
from context_service.domain.selection.units import group
from tests.selection.builders import call, response, sequence, text


def _units(*contents, input_ids=()):  # type: ignore[no-untyped-def]
    records = [event_record(e, DEFAULT_SECRET_KEYS) for e in sequence(*contents)]
    u = group(records, input_ids)
    return [[u.events[k].sequence for k in range(a, b + 1)] for a, b in u.bounds], u


def test_plain_messages_are_one_unit_each() -> None:
    units, u = _units(text("user", "a"), text("model", "b"))
    assert units == [[1], [2]] and u.orphan_responses == 0 and not u.pinned


def test_parallel_calls_and_all_their_responses_form_one_unit() -> None:
    units, _ = _units(
        text("user", "q"),
        call(("a", "f", {}), ("b", "g", {})),
        response(("a", "f", {})),
        text("user", "interleaved"),
        response(("b", "g", {})),
        text("model", "done"),
    )
    assert units == [[1], [2, 3, 4, 5], [6]]


def test_chained_calls_overlapping_spans_merge() -> None:
    units, _ = _units(
        call(("a", "f", {})),
        call(("b", "g", {})),
        response(("a", "f", {})),
        response(("b", "g", {})),
    )
    assert units == [[1, 2, 3, 4]]


def test_orphan_call_is_its_own_unit_and_orphan_response_is_dropped() -> None:
    units, u = _units(
        response(("ghost", "f", {})),
        call(("lonely", "f", {})),
        text("user", "x"),
        response(("late", "f", {})),
        call(("late", "f", {})),  # the response came before its call: still an orphan
    )
    assert units == [[2], [3], [5]]
    assert u.orphan_responses == 2


def test_a_call_answered_by_the_current_input_is_pinned_to_the_end() -> None:
    units, u = _units(text("user", "q"), call(("a", "f", {})), text("model", "thinking aloud"), input_ids=["a"])
    assert units == [[1], [2, 3]] and u.pinned


def test_many_events_are_grouped_in_one_pass() -> None:
    contents = []
    for i in range(2000):
        contents += [call((f"c{i}", "f", {})), response((f"c{i}", "f", {}))]
    units, _ = _units(*contents)
    assert len(units) == 2000 and all(len(unit) == 2 for unit in units)
