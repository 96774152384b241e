"""Every built request pairs its function calls and responses as each
provider requires (``tests.fakes.tool_rules``), whatever the stored history
holds: calls left unanswered (a user message sent instead of the result),
late, duplicated or orphan responses, id-less calls, compactions and
budgets. The stored events never change."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentctx_common.errors import ResourceExhausted
from cache_service.domain.model import ModelCall
from cache_service.providers.anthropic.wire import _messages as anthropic_messages
from cache_service.providers.openai.wire import _messages as openai_messages
from context_service.domain import model as m
from context_service.domain import selection as sel
from context_service.domain.config import OverflowMode, SelectionPolicy
from context_service.domain.selection import NOT_ANSWERED, ContentRecord
from context_service.domain.selection.pairing import paired_already, repaired
from tests.fakes.tool_rules import anthropic_violation, gemini_violation, openai_violation
from tests.selection.builders import call, compaction, event, response, sequence, text
from tests.selection.test_properties import PROPERTY_SETTINGS


def built(
    events: list[m.Event], inputs: list[m.Content], policy: SelectionPolicy | None = None,
    memory: list[m.Content] = (),  # type: ignore[assignment]
) -> list[m.Content]:
    """The request's contents as the builder makes them (history, then the
    input with the memory in it), with the accounting checked against them."""
    p = sel.effective_policy(None, policy or SelectionPolicy())
    keys = sel.secret_keys(p)
    records = [sel.event_record(e, keys) for e in events]
    ins = [sel.content_record(c, keys) for c in inputs]
    mem = [sel.content_record(c, keys) for c in memory]
    s = sel.select(records, ins, p)
    if s.pending is not None:
        s = sel.finish_compression(s, "s" * s.pending.max_summary_bytes, keys)
    parts = sel.RequestParts("m", None, (), None, None, mem, ins)
    if paired_already(s, parts):
        # The shortcut (kept with the grouping) agrees with the full pass.
        assert repaired(s, parts) == (s, parts)
    s, parts = sel.pair_calls(s, parts)
    contents: list[ContentRecord] = [*s.history, *parts.current]
    a = sel.account(s, parts, p)
    assert a.history.bytes == sum(r.size for r in s.history)
    return [r.content for r in contents]


def as_json(contents: list[m.Content]) -> tuple[dict[str, Any], ...]:
    keys = sel.secret_keys(sel.effective_policy(None, SelectionPolicy()))
    return tuple(json.loads(sel.content_record(c, keys).canonical) for c in contents)


def violations(contents: list[m.Content]) -> list[str]:
    if not contents:
        return []  # an empty request is refused for that, not for pairing
    wire = as_json(contents)
    found = [
        anthropic_violation(anthropic_messages(wire)),
        (openai_violation(openai_messages(ModelCall("m", wire))) or (None,))[0],
        gemini_violation(wire),
    ]
    return [v for v in found if v is not None]


def shape(contents: list[m.Content]) -> list[tuple[str, ...]]:
    """Each content as its role and parts: text, call id, response id."""
    def part(p: m.Part) -> str:
        if p.function_call is not None:
            return f"call:{p.function_call.id}"
        if p.function_response is not None:
            fr = p.function_response
            return f"none:{fr.id}" if fr.response == {"error": NOT_ANSWERED} else f"resp:{fr.id}"
        return f"text:{p.text}"
    return [(c.role, *map(part, c.parts)) for c in contents]


CALL = call(("c1", "f", {}))
ANSWER = response(("c1", "f", {"ok": 1}))


def test_a_user_message_instead_of_the_result_gets_a_synthesized_response() -> None:
    contents = built(sequence(text("user", "go"), CALL, text("user", "never mind")), [text("user", "hi")])
    assert shape(contents) == [
        ("user", "text:go"), ("model", "call:c1"), ("user", "none:c1"), ("user", "text:never mind"), ("user", "text:hi"),
    ]
    assert violations(contents) == []


def test_the_calls_the_input_answers_are_not_synthesized() -> None:
    contents = built(sequence(text("user", "go"), CALL), [ANSWER])
    assert shape(contents) == [("user", "text:go"), ("model", "call:c1"), ("user", "resp:c1")]


def test_a_call_without_input_is_answered_in_the_built_request_only() -> None:
    events = sequence(text("user", "go"), CALL)
    before = copy.deepcopy(events)
    assert shape(built(events, [])) == [("user", "text:go"), ("model", "call:c1"), ("user", "none:c1")]
    assert events == before


def test_memory_goes_after_the_responses_the_input_opens_with() -> None:
    """Memory sits right before the current input, never between a call and
    its responses; with no input of the request's own it ends the request."""
    memory = [text("user", "fact")]
    contents = built(sequence(text("user", "go"), CALL), [ANSWER, text("user", "and?")], memory=memory)
    assert shape(contents) == [
        ("user", "text:go"), ("model", "call:c1"), ("user", "resp:c1"), ("user", "text:fact"), ("user", "text:and?"),
    ]
    assert violations(contents) == []
    contents = built(sequence(text("user", "go"), CALL, ANSWER), [], memory=memory)
    assert shape(contents) == [("user", "text:go"), ("model", "call:c1"), ("user", "resp:c1"), ("user", "text:fact")]
    assert violations(contents) == []
    # A call in the memory is answered right after it, before the input.
    contents = built(sequence(text("user", "go")), [text("user", "next")], memory=[CALL])
    assert shape(contents) == [("user", "text:go"), ("model", "call:c1"), ("user", "none:c1"), ("user", "text:next")]


def test_a_late_response_moves_next_to_its_call() -> None:
    contents = built(sequence(CALL, text("user", "wait"), text("model", "ok"), ANSWER), [])
    assert shape(contents) == [("model", "call:c1"), ("user", "resp:c1"), ("user", "text:wait"), ("model", "text:ok")]


def test_responses_without_their_call_are_dropped() -> None:
    mixed = m.Content("user", (m.Part(text="see"), m.Part(function_response=m.FunctionResponse("ghost", "f", {}))))
    contents = built(sequence(mixed, CALL, ANSWER, response(("c1", "f", {"again": 1}))), [])
    assert shape(contents) == [("user", "text:see"), ("model", "call:c1"), ("user", "resp:c1")]


def test_a_response_whose_call_was_compacted_away_is_dropped() -> None:
    events = [*sequence(text("user", "go"), CALL, text("user", "x")), compaction(4, "earlier", first_kept=3)]
    contents = built(events, [ANSWER])
    assert shape(contents) == [("user", "text:Summary of the earlier conversation:\nearlier"), ("user", "text:x")]
    assert violations(contents) == []


def test_parallel_calls_half_answered() -> None:
    calls = call(("a", "f", {}), ("b", "g", {}))
    contents = built(sequence(calls, response(("a", "f", {})), text("user", "next")), [])
    assert shape(contents) == [
        ("model", "call:a", "call:b"), ("user", "none:b"), ("user", "resp:a"), ("user", "text:next"),
    ]
    assert violations(contents) == []


def test_id_less_calls_pair_by_name_in_order() -> None:
    calls = call(("", "f", {"n": 1}), ("", "f", {"n": 2}))
    contents = built(sequence(calls, response(("", "f", {"r": 1}))), [])
    assert violations(contents) == []
    assert shape(contents)[1:] == [("user", "none:"), ("user", "resp:")]


# --- any history ----------------------------------------------------------------------

IDS = ["a", "b", "c", "d", ""]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[m.Event], list[m.Content], list[m.Content]]:
    """Stored events, memory and a current input: calls, responses to any
    id (answered, late, twice, never called), user and model messages, mixed
    contents and compactions."""
    def fc() -> m.Part:
        i = draw(st.sampled_from(IDS))
        return m.Part(function_call=m.FunctionCall(i, draw(st.sampled_from(["f", "g"])), {}))

    def fr() -> m.Part:
        i = draw(st.sampled_from(IDS))
        return m.Part(function_response=m.FunctionResponse(i, draw(st.sampled_from(["f", "g"])), {"r": 1}))

    def words() -> m.Part:
        return m.Part(text=draw(st.text("abc ", min_size=1, max_size=30)))

    def content() -> m.Content:
        kind = draw(st.sampled_from(["user", "model", "calls", "responses", "mixed", "model_mixed"]))
        if kind == "user":
            return m.Content("user", (words(),))
        if kind == "model":
            return m.Content("model", (words(),))
        if kind == "calls":
            # A model's calls in one content have distinct ids (or none).
            calls: dict[str, m.Part] = {}
            for _ in range(draw(st.integers(1, 3))):
                part = fc()
                assert part.function_call is not None
                calls[part.function_call.id or str(len(calls))] = part
            return m.Content("model", tuple(calls.values()))
        if kind == "responses":
            return m.Content("user", tuple(fr() for _ in range(draw(st.integers(1, 3)))))
        if kind == "mixed":
            return m.Content("user", tuple(draw(st.permutations([words(), fr()]))))
        return m.Content("model", (words(), fc()))

    events: list[m.Event] = []
    for _ in range(draw(st.integers(0, 25))):
        seq = len(events) + 1
        if events and draw(st.integers(0, 9)) == 0:
            events.append(compaction(seq, "earlier", first_kept=draw(st.integers(1, seq))))
        else:
            events.append(event(seq, content(), partial=draw(st.integers(0, 9)) == 0))
    memory = [content() for _ in range(draw(st.integers(0, 2)))]
    inputs = [content() for _ in range(draw(st.integers(0, 2)))]
    return events, memory, inputs


policies = st.builds(
    SelectionPolicy,
    max_bytes=st.one_of(st.none(), st.integers(100, 3000)),
    overflow=st.sampled_from([OverflowMode.TRUNCATE, OverflowMode.COMPRESS]),
    disable_calibration=st.just(True),
)


@PROPERTY_SETTINGS
@given(history=st.one_of(histories(), st.deferred(lambda: agent_histories())), policy=policies)
def test_every_built_request_pairs_as_every_provider_requires(
    history: tuple[list[m.Event], list[m.Content], list[m.Content]], policy: SelectionPolicy
) -> None:
    events, memory, inputs = history
    before = copy.deepcopy(events)
    try:
        contents = built(events, inputs, policy, memory)
    except ResourceExhausted:
        return  # the input alone is over the budget: nothing is built
    assert events == before, "no stored event changes"
    assert violations(contents) == []
    assert all(c.parts for c in contents)


@st.composite
def agent_histories(draw: st.DrawFn) -> tuple[list[m.Event], list[m.Content], list[m.Content]]:
    """Histories of well-behaved agents (every call answered), now and then
    one skipping a result; the input answering the newest calls or not."""
    contents: list[m.Content] = []
    pending: list[m.Part] = []
    for turn in range(draw(st.integers(0, 8))):
        if pending and draw(st.integers(0, 4)):
            fr = [m.Part(function_response=m.FunctionResponse(p.function_call.id, p.function_call.name, {}))
                  for p in pending if p.function_call is not None]
            contents.append(m.Content("user", tuple(fr)))
        else:
            contents.append(m.Content("user", (m.Part(text=f"question {turn}"),)))
        n = draw(st.integers(0, 2))
        pending = [m.Part(function_call=m.FunctionCall(f"t{turn}c{i}", "f", {})) for i in range(n)]
        contents.append(m.Content("model", tuple(pending) or (m.Part(text="answer"),)))
    inputs = [m.Content("user", (m.Part(text="next"),))]
    if pending and draw(st.booleans()):
        inputs = [m.Content("user", tuple(
            m.Part(function_response=m.FunctionResponse(p.function_call.id, "f", {}))
            for p in pending if p.function_call is not None))]
    memory = [m.Content("user", (m.Part(text="remembered"),))] if draw(st.booleans()) else []
    return [event(i + 1, c) for i, c in enumerate(contents)], memory, inputs


@PROPERTY_SETTINGS
@given(history=st.one_of(agent_histories(), histories()), cut=st.integers(0, 30))
def test_the_shortcut_agrees_with_the_full_pass_across_appends(
    history: tuple[list[m.Event], list[m.Content], list[m.Content]], cut: int
) -> None:
    events, memory, inputs = history
    p = sel.effective_policy(None, SelectionPolicy(disable_calibration=True))
    keys = sel.secret_keys(p)
    records = [sel.event_record(e, keys) for e in events]
    ins = [sel.content_record(c, keys) for c in inputs]
    parts = sel.RequestParts("m", None, (), None, None, [sel.content_record(c, keys) for c in memory], ins)
    memo: dict[Any, Any] = {}
    for upto in (min(cut, len(records)), len(records)):
        warm = sel.select(records[:upto], ins, p, memo=memo)
        fast = paired_already(warm, parts)
        if fast:
            assert repaired(warm, parts) == (warm, parts)
        assert fast == paired_already(sel.select(records[:upto], ins, p), parts), "kept with the grouping as fresh"
