"""A build's three fingerprints, made from the hash states its grouping
saved for a shorter history (only the appended contents hashed), equal
the fingerprints hashed whole from their definitions, for any history
grown by any sequence of appends, a turn's prefix of it built between
(its input left out), a summary, budgets that drop the oldest units, and
requests that change around the history (model, input, memory)."""

from __future__ import annotations

import hashlib
import json
import types
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_common.canonical import canonical_json
from context_service.domain import model as m
from context_service.domain.config import OverflowMode, SelectionPolicy
from context_service.domain.selection import (
    DEFAULT_SECRET_KEYS,
    EventRecord,
    RequestParts,
    account,
    content_record,
    effective_policy,
    event_record,
    pair_calls,
    select,
)
from context_service.domain.selection import envelope as envelope_module
from context_service.domain.selection.grouping import carried
from tests.selection.builders import event, text
from tests.selection.test_incremental_grouping import history, item

KEYS = DEFAULT_SECRET_KEYS


def _parts(model: str, inputs: list[str], memory: list[str]) -> RequestParts:
    return RequestParts(
        model=model,
        system_instruction=content_record(text("system", "Be brief."), KEYS),
        tools=[b'{"functionDeclarations":[]}'],
        tool_config=None,
        generation_config=b'{"temperature":0.2}',
        memory=[content_record(text("user", t), KEYS) for t in memory],
        inputs=[content_record(text("user", t), KEYS) for t in inputs],
    )


def _defined(selection: Any, parts: RequestParts) -> tuple[str, str, str]:
    """The three fingerprints from their definitions: each document
    encoded whole with ``canonical_json``, the digests of the history."""
    history_records = selection.paired if selection.paired is not None else selection.history
    history_json = [json.loads(c.canonical) for c in history_records]
    assert parts.system_instruction is not None
    common = {"model": parts.model, "systemInstruction": json.loads(parts.system_instruction.canonical),
              "toolConfig": None, "tools": [{"functionDeclarations": []}]}
    prefix = canonical_json({"history": history_json, **common})
    envelope = canonical_json({"contents": [*history_json, *(json.loads(c.canonical) for c in parts.current)],
                               "generationConfig": {"temperature": 0.2}, **common})
    chosen = hashlib.sha256(b"".join(c.digest for c in history_records)).hexdigest()
    return hashlib.sha256(prefix).hexdigest(), chosen, hashlib.sha256(envelope).hexdigest()


def _exchanges(kinds: list[bool]) -> list[Any]:
    """Items of a history whose calls are each answered right away (one the
    pairing leaves as it is, so the fingerprints come from the grouping)."""
    out: list[Any] = []
    for n, is_call in enumerate(kinds):
        if is_call:
            out.append(([m.Part(function_call=m.FunctionCall(f"c{n}", "f", {"q": n, "api_key": "k"}))], False, "agent", 0))
            out.append(([m.Part(function_response=m.FunctionResponse(f"c{n}", "f", {"ok": n}))], False, "user", 0))
        else:
            out.append(([m.Part(text=f"said {n}")], False, "user", 0))
    return out


def _fingerprints(a: Any) -> tuple[str, str, str]:
    return a.prefix_fingerprint, a.selection_fingerprint, a.envelope_fingerprint


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(item, min_size=1, max_size=24) | st.lists(st.booleans(), min_size=1, max_size=12).map(_exchanges),
    cuts=st.lists(st.integers(0, 30), max_size=8),
    compact_at=st.one_of(st.none(), st.integers(0, 20)),
    budget=st.one_of(st.none(), st.integers(300, 3000)),
    models=st.lists(st.sampled_from(["m-1", "m-2"]), min_size=1, max_size=3),
    memory=st.lists(st.text("ab ", min_size=1, max_size=4), max_size=2),
    repeat=st.booleans(),
)
def test_fingerprints_from_saved_states_equal_the_whole_computation(
    items: list[Any], cuts: list[int], compact_at: int | None, budget: int | None, models: list[str],
    memory: list[str], repeat: bool,
) -> None:
    records = history(items, compact_at)
    policy = effective_policy(None, SelectionPolicy(max_bytes=budget, overflow=OverflowMode.TRUNCATE))
    memo: dict[Any, Any] = {}
    live: list[EventRecord] = []  # the history cache's append-only list
    points = sorted({min(c, len(records)) for c in cuts} | {len(records)})
    done = 0
    turn = 0
    for point in points:
        live.extend(records[done:point])
        done = point
        memo = carried(memo)  # what the history cache does when the list grows
        for upto in (max(0, point - 1), point, point) if repeat else (point,):  # a turn's prefix, whole, again
            view = live if upto == len(live) else live[:upto]
            turn += 1
            parts = _parts(models[turn % len(models)], [f"turn {turn}"], memory)
            selection = select(view, parts.inputs, policy, memo=memo)
            selection, paired_parts = pair_calls(selection, parts)
            saved = account(selection, paired_parts, policy)
            assert _fingerprints(saved) == _defined(selection, paired_parts)
            scratch = select(list(view), parts.inputs, policy)
            scratch, scratch_parts = pair_calls(scratch, parts)
            assert _fingerprints(account(scratch, scratch_parts, policy)) == _fingerprints(saved)


def test_a_repeated_build_hashes_no_history_and_an_append_only_the_new_contents(monkeypatch: Any) -> None:
    """What the saved states save: the bytes a build hashes stop growing
    with the history."""
    hashed: list[int] = []

    class Counting:
        def __init__(self, data: bytes = b"") -> None:
            self.h = hashlib.sha256(data)
            hashed.append(len(data))

        def update(self, data: Any) -> None:
            hashed.append(len(data))
            self.h.update(data)

        def copy(self) -> Counting:
            out = Counting.__new__(Counting)
            out.h = self.h.copy()
            return out

        def hexdigest(self) -> str:
            return self.h.hexdigest()

    long = "x" * 2000
    records = [event_record(event(i, text("user", f"{i} {long}")), KEYS) for i in range(1, 101)]
    monkeypatch.setattr(envelope_module, "hashlib", types.SimpleNamespace(sha256=Counting))
    policy = effective_policy(None, None)
    parts = _parts("m-1", ["now?"], [])
    memo: dict[Any, Any] = {}

    def build(upto: int) -> int:
        hashed.clear()
        selection = select(records[:upto], parts.inputs, policy, memo=memo)
        selection, paired_parts = pair_calls(selection, parts)
        a = account(selection, paired_parts, policy)
        assert _fingerprints(a) == _defined(selection, paired_parts)
        return sum(hashed)

    first = build(99)
    assert first > 2 * 99 * 2000  # prefix and envelope: the whole history each
    assert build(99) < 2000  # the same history again: nothing of it
    memo = carried(memo)
    assert build(100) < 3 * 2100  # one content appended: it alone, in each of the three
