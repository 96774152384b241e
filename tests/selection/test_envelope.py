"""Envelope accounting: sections, framing, the request budget and the
fingerprints."""

from __future__ import annotations

import pytest

from agentctx_common.errors import ResourceExhausted
from context_service.domain import model as m
from context_service.domain.config import SelectionPolicy
from context_service.domain.selection import (
    DEFAULT_SECRET_KEYS,
    RequestParts,
    account,
    content_record,
    effective_policy,
    event_record,
    select,
)
from tests.selection.builders import call, response, sequence, text

KEYS = DEFAULT_SECRET_KEYS


def build(policy: SelectionPolicy | None = None, *, memory=(), tools=(b'{"functionDeclarations":[]}',)):  # type: ignore[no-untyped-def]
    p = effective_policy(None, policy)
    events = sequence(text("user", "hello"), call(("a", "f", {"token": "t", "q": 1})), response(("a", "f", {"r": 2})))
    recs = [event_record(e, KEYS) for e in events]
    inputs = [content_record(m.Content("user", (m.Part(inline_data=m.Blob("image/png", bytes(3000))),)), KEYS)]
    selection = select(recs, inputs, p)
    parts = RequestParts(
        model="gemini-x",
        system_instruction=content_record(text("system", "Be brief."), KEYS),
        tools=list(tools),
        tool_config=b'{"allowedFunctionNames":[],"mode":"AUTO"}',
        generation_config=b'{"temperature":0.2}',
        memory=[content_record(c, KEYS) for c in memory],
        inputs=inputs,
    )
    return account(selection, parts, p), selection, parts


def test_sections_add_up_and_framing_is_documented() -> None:
    a, _selection, parts = build(memory=[text("user", "remembered fact")])
    sections = [a.instructions, a.settings, a.history, a.memory, a.input, a.tools, a.framing]
    assert a.request.bytes == sum(s.bytes for s in sections)
    contents = 3 + 1 + 1  # history, memory, input
    assert a.framing.bytes == 64 * (contents + 1 + 1) + 256  # + one tool + the system instruction
    assert a.input.bytes >= 3000  # inline data counted in full, at its raw length
    assert a.settings.bytes == len(parts.tool_config) + len(parts.generation_config)
    assert a.request.tokens == -(-a.request.bytes // 4)
    assert (a.events_seen, a.events_selected, a.units_selected, a.secrets_pruned) == (3, 3, 2, 1)


def test_request_budget_error_names_the_measured_and_allowed_figures() -> None:
    a, *_ = build()
    with pytest.raises(ResourceExhausted) as info:
        build(SelectionPolicy(max_request_bytes=a.request.bytes - 1))
    err = info.value
    assert err.reason == "REQUEST_CONTEXT_BUDGET_EXCEEDED"
    assert err.metadata["limit"] == "max_request_bytes"
    assert err.metadata["measured_bytes"] == str(a.request.bytes)
    assert err.metadata["allowed_bytes"] == str(a.request.bytes - 1)
    with pytest.raises(ResourceExhausted) as info:
        build(SelectionPolicy(max_request_tokens=a.request.tokens - 1))
    assert info.value.metadata["limit"] == "max_request_tokens"
    assert info.value.metadata["allowed_tokens"] == str(a.request.tokens - 1)
    exact, *_ = build(SelectionPolicy(max_request_bytes=a.request.bytes, max_request_tokens=a.request.tokens))
    assert exact == a


def test_fingerprints_are_deterministic_and_separate() -> None:
    a, *_ = build()
    b, *_ = build()
    assert a == b
    c, *_ = build(tools=(b'{"functionDeclarations":[{"name":"g"}]}',))
    assert c.selection_fingerprint == a.selection_fingerprint
    assert c.prefix_fingerprint != a.prefix_fingerprint and c.envelope_fingerprint != a.envelope_fingerprint
    # Memory goes after the history, with the current input: outside the prefix.
    d, *_ = build(memory=[text("user", "m")])
    assert d.selection_fingerprint == a.selection_fingerprint and d.prefix_fingerprint == a.prefix_fingerprint
    assert d.envelope_fingerprint != a.envelope_fingerprint
    assert len({a.prefix_fingerprint, a.selection_fingerprint, a.envelope_fingerprint}) == 3
