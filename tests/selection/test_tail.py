"""Bounded builds read newest first (``building.tail``): on random histories
the selection equals the full read's, a page boundary never splits a tool
call from its responses, and a long history is read only as far as the
budget reaches."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentctx_common.errors import ResourceExhausted
from context_service.building.history import HistoryView, without
from context_service.building.tail import TailReader, bounded
from context_service.domain import model as m
from context_service.domain.config import ContextConfig, OverflowMode, SelectionPolicy
from context_service.domain.selection import content_record, effective_policy, event_record, secret_keys, select
from context_service.domain.session_records import SessionHead
from tests.selection.builders import call, event, response, text
from tests.selection.test_properties import PROPERTY_SETTINGS, histories

KEY = m.SessionKey("app", "u", "s")


class Pages:
    """An in-memory ``ports.EventPages`` counting the rows it hands out."""

    def __init__(self, events: list[m.Event]) -> None:
        self.events = events
        self.rows = 0

    async def list_events_before(self, key: m.SessionKey, *, before_sequence: int, limit: int) -> list[m.Event]:
        older = [e for e in self.events if before_sequence <= 0 or e.sequence < before_sequence]
        page = older[-limit:]
        self.rows += len(page)
        return page

    async def latest_compaction(self, key: m.SessionKey) -> m.Event | None:
        self.rows += 1
        return next((e for e in reversed(self.events) if e.is_compaction), None)

    async def list_events(self, key: m.SessionKey, *, after_sequence: int = 0, **_: Any) -> list[m.Event]:
        newer = [e for e in self.events if e.sequence > after_sequence]
        self.rows += len(newer)
        return newer


def head(events: list[m.Event], incarnation: str = "i1") -> SessionHead:
    return SessionHead(KEY, incarnation, events[-1].sequence if events else 0, ContextConfig())


def with_usage(events: list[m.Event], data: st.DataObject) -> list[m.Event]:
    """Some model replies carry growing prompt token counts (calibration)."""
    tokens = 0
    out = []
    for e in events:
        if e.content is not None and e.content.role == "model" and data.draw(st.booleans()):
            tokens += data.draw(st.integers(1, 400))
            e = dataclasses.replace(e, usage=m.Usage(prompt_tokens=tokens))
        out.append(e)
    return out


def outcome(run: Any) -> Any:
    """What a build shows a caller: the selected history or the error."""
    try:
        s = run()
    except ResourceExhausted as exc:
        return ("error", exc.reason, str(exc))
    return (
        [r.event_id for r in s.events], s.summary.canonical if s.summary is not None else None,
        s.history_bytes, s.units_selected, s.bytes_per_token, s.calibrated, s.compaction_sequence, s.last_sequence,
    )


truncating = st.builds(
    SelectionPolicy,
    max_bytes=st.one_of(st.none(), st.integers(1, 3000)),
    max_tokens=st.one_of(st.none(), st.integers(1, 800)),
    bytes_per_token=st.sampled_from([None, 1.0, 4.0]),
    overflow=st.just(OverflowMode.TRUNCATE),
    disable_calibration=st.booleans(),
).filter(bounded)


@PROPERTY_SETTINGS
@given(history=histories(), policy=truncating, page=st.integers(1, 5), excluded=st.integers(0, 2), data=st.data())
def test_a_bounded_build_selects_what_the_full_read_selects(
    history: tuple[list[m.Event], list[m.Content]], policy: SelectionPolicy, page: int, excluded: int, data: st.DataObject
) -> None:
    events, current = history
    events = with_usage(events, data)
    p = effective_policy(None, policy)
    keys = secret_keys(p)
    inputs = [content_record(c, keys) for c in current]
    # A turn's own input events: the newest messages.
    newest = events[len(events) - excluded:] if excluded else []
    exclude = frozenset(e.id for e in newest if not e.is_compaction)
    records = [event_record(e, keys) for e in events]
    view = without(HistoryView(records, None), exclude) if exclude else HistoryView(records, None)
    full = outcome(lambda: select(view.records, inputs, p))

    reader = TailReader(Pages(events), lambda c: None, page=page)  # type: ignore[arg-type,return-value]
    result: list[Any] = []

    async def bounded_build() -> None:
        try:
            selection, _ = await reader.select(head(events), keys, inputs, p, exclude)
            result.append(selection)
        except ResourceExhausted as exc:
            result.append(exc)

    asyncio.run(bounded_build())
    got = result[0]
    assert outcome(lambda: _reraise(got)) == full


def _reraise(value: Any) -> Any:
    if isinstance(value, Exception):
        raise value
    return value


@settings(PROPERTY_SETTINGS, max_examples=60)
@given(history=histories(), policy=truncating, split=st.integers(0, 30), page=st.integers(1, 3), data=st.data())
def test_builds_between_appends_stay_equal_to_the_full_read(
    history: tuple[list[m.Event], list[m.Content]], policy: SelectionPolicy, split: int, page: int,
    data: st.DataObject,
) -> None:
    """A reader that saw a prefix, then takes the rest a few events at a
    time (this process's appends, or read from the store), with a build
    after each step (suffixes extended and trimmed), selects what a full
    read does every time."""
    events, current = history
    events = with_usage(events, data)
    p = effective_policy(None, policy)
    keys = secret_keys(p)
    inputs = [content_record(c, keys) for c in current]
    at = min(split, len(events))
    source = Pages(events[:at])
    reader = TailReader(source, lambda c: None, page=page)  # type: ignore[arg-type,return-value]

    async def steps() -> None:
        nonlocal at
        while True:
            seen = events[:at]
            records = [event_record(e, keys) for e in seen]
            full = outcome(lambda records=records: select(records, inputs, p))
            try:
                got: Any = (await reader.select(head(seen), keys, inputs, p))[0]
            except ResourceExhausted as exc:
                got = exc
            assert outcome(lambda got=got: _reraise(got)) == full
            if at >= len(events):
                return
            step = data.draw(st.integers(1, 4))
            new, at = events[at:at + step], min(len(events), at + step)
            source.events = events[:at]
            if data.draw(st.booleans()):
                reader.appended(KEY, new)

    asyncio.run(steps())


def long_history(n: int) -> list[m.Event]:
    """User text, tool calls and their answers, model replies with usage."""
    events: list[m.Event] = []
    while len(events) < n:
        seq = len(events) + 1
        events.append(event(seq, text("user", f"question {seq} " + "x" * 40)))
        events.append(event(seq + 1, call((f"c{seq}", "f", {"q": seq}))))
        events.append(event(seq + 2, response((f"c{seq}", "f", {"r": "y" * 30}))))
        events.append(dataclasses.replace(
            event(seq + 3, text("model", f"answer {seq}")), usage=m.Usage(prompt_tokens=20 * seq)
        ))
    return events[:n]


@pytest.mark.parametrize("n", [1_000, 20_000])
async def test_a_bounded_build_of_a_long_history_reads_a_bounded_number_of_events(n: int) -> None:
    every = long_history(n + 600)
    events = every[:n]
    source = Pages(events)
    reader = TailReader(source, lambda c: None)  # type: ignore[arg-type,return-value]
    policy = effective_policy(None, SelectionPolicy(max_bytes=20_000, overflow=OverflowMode.TRUNCATE))
    keys = secret_keys(policy)
    selection, _ = await reader.select(head(events), keys, [], policy)
    assert 50 < len(selection.events) < 400
    assert source.rows <= 2 * reader.page + 1  # cold: pages the budget reaches, whatever n
    source.rows = 0
    for _ in range(150):  # appends and builds: the entry is trimmed, nothing more is read
        new = every[len(events):len(events) + 4]
        events += new
        reader.appended(KEY, new)
        selection, _ = await reader.select(head(events), keys, [], policy)
        [(_, held)] = reader.entries()
        assert held <= 4 * reader.page
    assert source.rows == 0
    full = select([event_record(e, keys) for e in events], [], policy)
    assert [r.event_id for r in selection.events] == [r.event_id for r in full.events]


async def test_an_orphan_response_among_the_newest_events_is_read_past_once() -> None:
    """A response whose call is nowhere makes the first build read to the
    window's start (its call could be older); later builds remember it."""
    every = long_history(3_000)
    orphan = event(0, response(("ghost", "f", {"r": 1})))
    events = [dataclasses.replace(e, sequence=i + 1) for i, e in enumerate([*every[:1_990], orphan, *every[1_990:2_000]])]
    source = Pages(events)
    reader = TailReader(source, lambda c: None)  # type: ignore[arg-type,return-value]
    policy = effective_policy(None, SelectionPolicy(max_bytes=20_000, overflow=OverflowMode.TRUNCATE))
    keys = secret_keys(policy)
    await reader.select(head(events), keys, [], policy)
    assert source.rows >= len(events)  # read to the start once
    source.rows = 0
    for i in range(200):
        new = dataclasses.replace(every[2_000 + i], sequence=len(events) + 1)
        events.append(new)
        reader.appended(KEY, [new])
        selection, _ = await reader.select(head(events), keys, [], policy)
    assert source.rows == 0
    full = select([event_record(e, keys) for e in events], [], policy)
    assert [r.event_id for r in selection.events] == [r.event_id for r in full.events]
