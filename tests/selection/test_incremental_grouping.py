"""The grouping a memo extends append by append equals a grouping built
from scratch, for any history and any way of splitting it into appends
(a tool call and its results in different appends included), for the whole
history and for any prefix of it (a turn leaving its own input out), and
both equal the original reach-scan grouping kept here as the reference."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_service.domain import model as m
from context_service.domain.config import ContentType, EventFilter
from context_service.domain.selection import DEFAULT_SECRET_KEYS, EventRecord, event_record
from context_service.domain.selection.grouping import Grouping, carried, grouping
from tests.selection.builders import compaction, event

CALL_IDS = ["a", "b", "c", "d", "e"]


def reference_group(events: Iterable[EventRecord], input_response_ids: Iterable[str] = ()) -> tuple[Any, ...]:
    """The reach scan ``units.group`` used before it became incremental."""
    kept: list[EventRecord] = []
    sizes: list[int] = []
    reach: list[int] = []
    call_at: dict[str, int] = {}
    orphans = 0
    for r in events:
        body = r.body
        if body is None:
            continue
        pos = len(kept)
        if body.response_ids:
            linked = [call_at[i] for i in body.response_ids if i in call_at]
            if not linked and r.content_types <= frozenset({ContentType.FUNCTION_RESPONSE}):
                orphans += 1
                continue
            for p in linked:
                reach[p] = pos
        kept.append(r)
        sizes.append(body.size)
        reach.append(pos)
        for call_id in body.call_ids:
            call_at[call_id] = pos
    pinned_from = min((call_at[i] for i in input_response_ids if i in call_at), default=None)
    if pinned_from is not None:
        reach[pinned_from] = len(kept) - 1
    bounds, unit_sizes, i, n = [], [], 0, len(kept)
    while i < n:
        end = reach[i]
        j = i
        while j < end:
            j += 1
            end = max(end, reach[j])
        bounds.append((i, end))
        unit_sizes.append(sum(sizes[i:end + 1]))
        i = end + 1
    return [r.sequence for r in kept], bounds, unit_sizes, orphans, pinned_from is not None


part = st.one_of(
    st.text("xyz ", min_size=1, max_size=5).map(lambda t: m.Part(text=t)),
    st.sampled_from(CALL_IDS).map(lambda i: m.Part(function_call=m.FunctionCall(i, "f", {"q": i, "api_key": "k"}))),
    st.sampled_from([*CALL_IDS, "zz"]).map(
        lambda i: m.Part(function_response=m.FunctionResponse(i, "f", {"ok": i, "token": "t"}))
    ),
)
item = st.tuples(
    st.lists(part, min_size=1, max_size=3), st.booleans(), st.sampled_from(["user", "agent"]), st.integers(0, 30)
)


def history(items: list[tuple[list[m.Part], bool, str, int]], compact_at: int | None) -> list[EventRecord]:
    events = []
    for i, (parts, partial, author, _) in enumerate(items):
        role = "model" if any(p.function_call for p in parts) else "user"
        events.append(event(i + 1, m.Content(role, tuple(parts)), partial=partial and i % 5 == 0, author=author))
    if compact_at is not None and compact_at < len(events):
        events.insert(compact_at, compaction(compact_at + 1, "summary", first_kept=max(1, compact_at)))
        events = [dataclasses.replace(e, sequence=n + 1) for n, e in enumerate(events)]
    return [event_record(e, DEFAULT_SECRET_KEYS) for e in events]


def _digests(bodies: Any, older: bytes | None) -> bytes:
    """A derived value made by extension, as the wire layout is."""
    done = older or b""
    return done + b"".join(b.digest for b in bodies[len(done) // 32:])


def shape(g: Grouping) -> tuple[Any, ...]:
    u = g.units
    return (
        g.derive("digests", _digests),
        [r.sequence for r in u.events], u.bounds, u.sizes, u.orphan_responses, u.pinned, g.seen, g.filtered, g.total,
        bytes(g.joined_from(0)), [bytes(g.joined_from(p)) for p in range(len(u.events) + 1)],
        bytes(g.digests_from(0)), [g.pruned_from(p) for p in range(len(u.events) + 1)],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(item, max_size=24),
    cuts=st.lists(st.integers(0, 30), max_size=8),
    inputs=st.lists(st.sampled_from([*CALL_IDS, "zz"]), max_size=2),
    compact_at=st.one_of(st.none(), st.integers(0, 20)),
    filtered=st.booleans(),
    layout_early=st.booleans(),
)
def test_extended_grouping_equals_grouping_from_scratch(
    items: list[Any], cuts: list[int], inputs: list[str], compact_at: int | None, filtered: bool, layout_early: bool
) -> None:
    records = history(items, compact_at)
    event_filter = EventFilter(exclude_authors=("agent",)) if filtered else None
    input_ids = tuple(inputs)
    start = 0
    if compact_at is not None and compact_at < len(items):
        start = max(0, compact_at - 1)
    memo: dict[Any, Any] = {}
    live: list[EventRecord] = []  # the cache's append-only list
    points = sorted({min(c, len(records)) for c in cuts} | {len(records)})
    done = 0
    for point in points:
        live.extend(records[done:point])
        done = point
        memo = carried(memo)  # what the history cache does when the list grows
        for upto in (point, max(start, point - 1), point):  # whole, a turn's prefix, whole again
            if upto < start:
                continue
            view = live if upto == len(live) else live[:upto]
            extended = grouping(view, start, event_filter, input_ids, memo)
            if layout_early:
                extended.joined_from(0)  # later extensions then build on this layout
            scratch = grouping(list(view), start, event_filter, input_ids)
            assert shape(extended) == shape(scratch)
            window = [r for r in view[start:] if not r.is_compaction]
            keep = [r for r in window if r.body is not None and not r.partial and (not filtered or r.author != "agent")]
            assert shape(scratch)[1:6] == tuple(reference_group(keep, input_ids))


def test_a_call_and_its_result_in_separate_appends_stay_one_unit() -> None:
    from tests.selection.builders import call, response, text

    records = [event_record(e, DEFAULT_SECRET_KEYS) for e in (
        event(1, text("user", "q")), event(2, call(("a", "f", {}))), event(3, text("model", "thinking")),
        event(4, response(("a", "f", {}))),
    )]
    memo: dict[Any, Any] = {}
    first = grouping(records[:2], 0, None, (), memo)
    assert first.units.bounds == [(0, 0), (1, 1)]
    memo = carried(memo)
    grown = grouping(records[:4], 0, None, (), memo)
    assert grown.units.bounds == [(0, 0), (1, 3)] and first.units.bounds == [(0, 0), (1, 1)]  # the old one unchanged


def test_a_turns_input_at_the_end_is_left_out_as_a_prefix_sharing_the_memo() -> None:
    from context_service.building.history import HistoryView
    from context_service.building.history import without as _without
    from tests.selection.builders import text

    records = [event_record(event(i, text("user", f"m{i}")), DEFAULT_SECRET_KEYS) for i in range(1, 6)]
    view = HistoryView(records, None, {})
    tail = _without(view, frozenset({"e4", "e5"}))
    assert [r.sequence for r in tail.records] == [1, 2, 3] and tail.memo is view.memo
    # Someone appended after the input: a filtered list with its own memo.
    middle = _without(view, frozenset({"e3"}))
    assert [r.sequence for r in middle.records] == [1, 2, 4, 5] and middle.memo is not view.memo


def test_every_derived_value_extends_its_own_older_value() -> None:
    """A turn derives several values from one grouping (the pairing scan,
    then the wire layout): each is made from the value of the shorter
    history it extends, not only the first one derived."""
    from tests.selection.builders import text

    records = [event_record(event(i, text("user", f"m{i}")), DEFAULT_SECRET_KEYS) for i in range(1, 9)]
    olders: dict[str, list[int | None]] = {"first": [], "second": []}

    def make(name: str) -> Any:
        def made(bodies: Any, older: int | None) -> int:
            olders[name].append(older)
            return len(bodies)
        return made

    memo: dict[Any, Any] = {}
    for upto in (4, 6, 8):
        memo = carried(memo)
        g = grouping(records[:upto], 0, None, (), memo)
        assert g.derive("first", make("first")) == upto
        assert g.derive("second", make("second")) == upto
        assert g.derive("second", make("second")) == upto  # made once
    assert olders == {"first": [None, 4, 6], "second": [None, 4, 6]}
