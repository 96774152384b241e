"""Properties of selection over random histories: tool calls (parallel,
chained, orphaned), orphan responses, multimodal parts, partial events,
compactions and secrets at any depth."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_common.errors import ResourceExhausted
from context_service.domain import model as m
from context_service.domain.config import OverflowMode, SelectionPolicy
from context_service.domain.selection import (
    RequestParts,
    account,
    content_record,
    effective_policy,
    event_record,
    finish_compression,
    secret_keys,
    select,
)
from context_service.domain.selection.secrets import BUILTIN_SECRET_KEYS, normalize_key
from context_service.domain.selection.tokens import byte_allowance
from context_service.domain.selection.units import group
from tests.selection.builders import compaction, event

SECRET_VALUE = "SECRET-VALUE-do-not-send"
secret_key = st.sampled_from(BUILTIN_SECRET_KEYS).flatmap(
    lambda k: st.sampled_from([k, k.upper(), k.replace("_", "-"), k.title()])
)
plain_key = st.sampled_from(["q", "path", "count", "items", "name", "tokens_used", "secretary"])
leaf = st.one_of(st.integers(-5, 5), st.text("ab c", max_size=6), st.booleans(), st.none(), st.floats(-3, 3).map(lambda f: round(f, 2)))


def json_tree() -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.tuples(
                st.dictionaries(plain_key, children, max_size=2),
                st.dictionaries(secret_key, st.one_of(children, st.just(SECRET_VALUE)), max_size=2),
            ).map(lambda pair: {**pair[0], **pair[1]}),
        ),
        max_leaves=8,
    )


args = st.tuples(
    st.dictionaries(plain_key, json_tree(), max_size=2),
    st.dictionaries(secret_key, st.one_of(json_tree(), st.just(SECRET_VALUE)), max_size=2),
).map(lambda pair: {**pair[0], **pair[1]})
text_part = st.text("abcdefgh ", min_size=1, max_size=40).map(lambda t: m.Part(text=t))
blob_part = st.binary(max_size=64).map(lambda b: m.Part(inline_data=m.Blob("image/png", b)))
file_part = st.sampled_from(["gs://b/a.pdf", "https://x.test/f.png"]).map(lambda u: m.Part(file_data=m.FileData("application/pdf", u)))
media_part = st.one_of(text_part, blob_part, file_part)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[m.Event], list[m.Content]]:
    """Stored events (in sequence order) and a current input."""
    events: list[m.Event] = []
    pending: list[str] = []
    next_call = 0
    for _ in range(draw(st.integers(0, 30))):
        seq = len(events) + 1
        kind = draw(st.sampled_from(["user", "model", "calls", "responses", "orphan", "compaction"]))
        if kind == "user":
            parts = draw(st.lists(media_part, min_size=1, max_size=3))
            events.append(event(seq, m.Content("user", tuple(parts)), partial=draw(st.booleans()) and draw(st.booleans())))
        elif kind == "model":
            events.append(event(seq, m.Content("model", (draw(text_part),)), partial=draw(st.booleans()) and draw(st.booleans())))
        elif kind == "calls":
            n = draw(st.integers(1, 3))
            ids = [f"call{next_call + i}" for i in range(n)]
            next_call += n
            pending += ids
            parts = tuple(m.Part(function_call=m.FunctionCall(i, "tool", draw(args))) for i in ids)
            events.append(event(seq, m.Content("model", parts)))
        elif kind == "responses" and pending:
            answered = draw(st.lists(st.sampled_from(pending), min_size=1, max_size=3, unique=True))
            for i in answered:
                pending.remove(i)
            parts = tuple(m.Part(function_response=m.FunctionResponse(i, "tool", draw(args))) for i in answered)
            events.append(event(seq, m.Content("user", parts)))
        elif kind == "orphan":
            parts = (m.Part(function_response=m.FunctionResponse(f"ghost{seq}", "tool", draw(args))),)
            events.append(event(seq, m.Content("user", parts)))
        elif kind == "compaction" and events:
            first_kept = draw(st.integers(1, seq))
            events.append(compaction(seq, draw(st.text("xyz ", max_size=30)), first_kept=first_kept))
    current: list[m.Content] = []
    if pending and draw(st.booleans()):
        answered = draw(st.lists(st.sampled_from(pending), min_size=1, max_size=2, unique=True))
        current.append(m.Content("user", tuple(m.Part(function_response=m.FunctionResponse(i, "tool", draw(args))) for i in answered)))
    current.append(m.Content("user", tuple(draw(st.lists(media_part, min_size=1, max_size=2)))))
    return events, current


policies = st.builds(
    SelectionPolicy,
    max_bytes=st.one_of(st.none(), st.integers(1, 3000)),
    max_tokens=st.one_of(st.none(), st.integers(1, 800)),
    max_request_bytes=st.one_of(st.none(), st.integers(300, 6000)),
    max_request_tokens=st.one_of(st.none(), st.integers(100, 1500)),
    bytes_per_token=st.sampled_from([None, 1.0, 2.5, 4.0]),
    overflow=st.sampled_from([OverflowMode.TRUNCATE, OverflowMode.ERROR, OverflowMode.COMPRESS]),
    extra_secret_keys=st.sampled_from([(), ("Path",)]),
    disable_calibration=st.just(True),
)

PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(events: list[m.Event], current: list[m.Content], call_policy: SelectionPolicy):  # type: ignore[no-untyped-def]
    """Selection as the server runs it; COMPRESS answered by a compressor
    that fills the room it is given."""
    p = effective_policy(None, call_policy)
    keys = secret_keys(p)
    records = [event_record(e, keys) for e in events]
    inputs = [content_record(c, keys) for c in current]
    s = select(records, inputs, p)
    if s.pending is not None:
        s = finish_compression(s, "s" * s.pending.max_summary_bytes, keys)
    return p, records, inputs, s


def keys_in(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {normalize_key(k) for k in value} | set().union(*(keys_in(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(keys_in(v) for v in value)) if value else set()
    return set()


@PROPERTY_SETTINGS
@given(histories(), policies)
def test_results_respect_every_budget_or_fail_with_the_documented_error(history, call_policy) -> None:  # type: ignore[no-untyped-def]
    events, current = history
    try:
        p, _records, inputs, s = build(events, current, call_policy)
    except ResourceExhausted as err:
        p = effective_policy(None, call_policy)
        assert err.reason in {"CONTEXT_BUDGET_EXCEEDED", "CURRENT_INPUT_EXCEEDS_BUDGET", "COMPRESSED_CONTEXT_OVER_BUDGET"}
        if err.reason == "CONTEXT_BUDGET_EXCEEDED":
            assert p.overflow is OverflowMode.ERROR
        if err.reason == "COMPRESSED_CONTEXT_OVER_BUDGET":
            assert p.overflow is OverflowMode.COMPRESS
        allowed = byte_allowance(p.max_bytes, p.max_tokens, p.bytes_per_token)
        assert allowed is not None and int(err.metadata["measured_bytes"]) > allowed
        return
    allowed = byte_allowance(p.max_bytes, p.max_tokens, s.bytes_per_token)
    input_bytes = sum(c.size for c in inputs)
    assert s.history_bytes == sum(c.size for c in s.history)
    if allowed is not None:
        assert s.history_bytes + input_bytes <= allowed
    assert s.compressed == (s.units_dropped > 0 and p.overflow is OverflowMode.COMPRESS)
    parts = RequestParts("m", None, [b'{"functionDeclarations":[]}'], None, None, [], inputs)
    try:
        a = account(s, parts, p)
    except ResourceExhausted as err:
        assert err.reason == "REQUEST_CONTEXT_BUDGET_EXCEEDED"
        over_bytes = p.max_request_bytes is not None and int(err.metadata["measured_bytes"]) > p.max_request_bytes
        over_tokens = p.max_request_tokens is not None and int(err.metadata["measured_tokens"]) > p.max_request_tokens
        assert over_bytes or over_tokens
        return
    if p.max_request_bytes is not None:
        assert a.request.bytes <= p.max_request_bytes
    if p.max_request_tokens is not None:
        assert a.request.tokens <= p.max_request_tokens


@PROPERTY_SETTINGS
@given(histories(), policies)
def test_calls_stay_with_responses_and_truncation_keeps_the_newest_units(history, call_policy) -> None:  # type: ignore[no-untyped-def]
    events, current = history
    try:
        _, _records, inputs, s = build(events, current, call_policy)
    except ResourceExhausted:
        return
    unbounded_policy = dataclasses.replace(call_policy, max_bytes=None, max_tokens=None)
    *_, full = build(events, current, unbounded_policy)
    # Truncation keeps a suffix of the complete selection, in order.
    full_seqs = [r.sequence for r in full.events]
    kept = [r.sequence for r in s.events]
    assert kept == full_seqs[len(full_seqs) - len(kept):]
    assert kept == sorted(kept)
    if s.summary is not None and not s.compressed:
        assert kept == full_seqs
    # A call is never separated from its responses.
    selected_calls = {i for r in s.events for i in r.body.call_ids}
    for r in full.events:
        if any(i in selected_calls for i in r.body.response_ids):
            assert r.sequence in kept
    seen_calls: set[str] = set()
    for r in s.events:
        if r.body.response_ids and all(p.function_response is not None for p in r.body.content.parts):
            assert any(i in seen_calls for i in r.body.response_ids)
        seen_calls.update(r.body.call_ids)
    # A call the input answers is kept.
    for c in inputs:
        for i in c.response_ids:
            if any(i in r.body.call_ids for r in full.events):
                assert i in selected_calls
    # Dropping one more (older) unit was necessary: it would not have fit.
    if s.units_dropped and len(kept) < len(full_seqs) and call_policy.overflow is OverflowMode.TRUNCATE:
        p = effective_policy(None, call_policy)
        allowed = byte_allowance(p.max_bytes, p.max_tokens, s.bytes_per_token)
        units = group(full.events, [i for c in inputs for i in c.response_ids])
        cut = len(full_seqs) - len(kept)
        older = next(range(a, b + 1) for a, b in units.bounds if b == cut - 1)
        assert allowed is not None
        older_bytes = sum(full.events[k].body.size for k in older)
        assert s.history_bytes + sum(c.size for c in inputs) + older_bytes > allowed


@PROPERTY_SETTINGS
@given(histories(), policies)
def test_input_is_last_and_no_pruned_key_survives(history, call_policy) -> None:  # type: ignore[no-untyped-def]
    events, current = history
    try:
        p, _records, inputs, s = build(events, current, call_policy)
    except ResourceExhausted:
        return
    parts = RequestParts("m", None, [], None, None, [], inputs)
    a = account(s, parts, dataclasses.replace(p, max_request_bytes=None, max_request_tokens=None))
    contents = [*s.history, *inputs]
    assert contents[-len(inputs):] == inputs
    assert [c.content for c in contents[-len(current):]] == [_pruned(c, p) for c in current]
    forbidden = secret_keys(p).keys
    for c in contents:
        decoded = json.loads(c.canonical)
        assert not keys_in(decoded) & forbidden
        assert SECRET_VALUE not in c.canonical.decode()
    assert a.secrets_pruned == sum(c.secrets_pruned for c in contents)


def _pruned(c: m.Content, p: SelectionPolicy) -> m.Content:
    return content_record(c, secret_keys(p)).content


@PROPERTY_SETTINGS
@given(histories(), st.data())
def test_fingerprints_are_deterministic_and_change_with_any_selected_byte(history, data) -> None:  # type: ignore[no-untyped-def]
    events, current = history
    unbounded = SelectionPolicy(overflow=OverflowMode.TRUNCATE, disable_calibration=True)
    p, _, inputs, s = build(events, current, unbounded)
    parts = RequestParts("m", None, [], None, None, [], inputs)
    first = account(s, parts, p)
    again = account(build(events, current, unbounded)[3], parts, p)
    assert first == again
    texts = [i for i, e in enumerate(events) if e.sequence in {r.sequence for r in s.events} and e.content.parts[0].text]
    if not texts:
        return
    i = data.draw(st.sampled_from(texts))
    e = events[i]
    changed_part = dataclasses.replace(e.content.parts[0], text=e.content.parts[0].text + "!")
    mutated = [*events]
    mutated[i] = dataclasses.replace(e, content=m.Content(e.content.role, (changed_part, *e.content.parts[1:])))
    p2, _, inputs2, s2 = build(mutated, current, unbounded)
    other = account(s2, RequestParts("m", None, [], None, None, [], inputs2), p2)
    assert other.selection_fingerprint != first.selection_fingerprint
    assert other.envelope_fingerprint != first.envelope_fingerprint
    assert other.prefix_fingerprint != first.prefix_fingerprint
