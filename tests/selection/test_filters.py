"""Each filter condition, alone and combined."""

from __future__ import annotations

import datetime as dt

import pytest

from context_service.domain.config import ContentType, EventFilter
from context_service.domain.selection import DEFAULT_SECRET_KEYS, event_record
from context_service.domain.selection.filters import on_branch, predicate
from tests.selection.builders import T0, call, event, response, text

EVENTS = [
    event(1, text("user", "hi"), author="user", invocation_id="i1", branch=""),
    event(2, call(("a", "f", {})), author="root", invocation_id="i1", branch="root"),
    event(3, response(("a", "f", {})), author="root", invocation_id="i1", branch="root"),
    event(4, text("model", "part"), author="root", invocation_id="i2", branch="root.sub", partial=True),
    event(5, text("model", "all"), author="helper", invocation_id="i2", branch="root.sub", turn_complete=True),
    event(6, text("model", "other"), author="other", invocation_id="i3", branch="side"),
]
RECORDS = [event_record(e, DEFAULT_SECRET_KEYS) for e in EVENTS]


def kept(f: EventFilter | None) -> list[int]:
    p = predicate(f)
    return [r.sequence for r in RECORDS if p(r)]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (None, [1, 2, 3, 5, 6]),
        (EventFilter(include_partial=True), [1, 2, 3, 4, 5, 6]),
        (EventFilter(authors=("root",)), [2, 3]),
        (EventFilter(exclude_authors=("root", "other")), [1, 5]),
        (EventFilter(invocation_ids=("i2", "i3")), [5, 6]),
        (EventFilter(content_types=(ContentType.FUNCTION_CALL, ContentType.FUNCTION_RESPONSE)), [2, 3]),
        (EventFilter(start_time=T0 + dt.timedelta(seconds=2), end_time=T0 + dt.timedelta(seconds=5)), [2, 3]),
        (EventFilter(final_only=True), [1, 3, 5, 6]),
        (EventFilter(branch="root.sub"), [1, 2, 3, 5]),
        (EventFilter(branch="root.sub", authors=("helper", "user")), [1, 5]),
    ],
)
def test_filter(f: EventFilter | None, expected: list[int]) -> None:
    assert kept(f) == expected


def test_events_without_a_time_fail_a_time_range() -> None:
    r = event_record(event(1, text("user", "x"), create_time=None), DEFAULT_SECRET_KEYS)
    assert not predicate(EventFilter(start_time=T0))(r)


def test_naive_storage_times_are_read_as_utc() -> None:
    naive = event(1, text("user", "x"), create_time=dt.datetime(2026, 1, 1, 0, 0, 1))
    assert predicate(EventFilter(start_time=T0))(event_record(naive, DEFAULT_SECRET_KEYS))


@pytest.mark.parametrize(
    ("event_branch", "branch", "visible"),
    [("", "a.b", True), ("a", "a.b", True), ("a.b", "a.b", True), ("a.b.c", "a.b", False), ("ab", "a.b", False), ("a", "ab", False)],
)
def test_branch_visibility(event_branch: str, branch: str, visible: bool) -> None:
    assert on_branch(event_branch, branch) is visible
