"""The domain canonical form equals the shared proto canonical form, byte
for byte, so both services fingerprint the same bytes."""

from __future__ import annotations

import hashlib
import json
import pickle

from hypothesis import HealthCheck, given, settings

from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common import canonical
from context_service.domain import model as m
from context_service.domain.compaction_rules.sizing import measure
from context_service.domain.selection import DEFAULT_SECRET_KEYS, RequestParts, content_record
from context_service.domain.selection.canonical import (
    budget_size,
    content_bytes,
    content_dict,
    content_digest,
    peek_bytes,
    peek_digest,
)
from context_service.domain.selection.envelope import envelope_bytes, prefix_bytes
from context_service.mapping.convert import content_to_proto
from tests.support.domain_contents import content

RICH = m.Content(
    "model",
    (
        m.Part(text="héllo \"wörld\" \n ✓"),
        m.Part(text="thinking", thought=True, thought_signature=b"\x00sig\xff"),
        m.Part(inline_data=m.Blob("image/png", bytes(range(256)))),
        m.Part(file_data=m.FileData("application/pdf", "gs://bucket/a b.pdf")),
        m.Part(function_call=m.FunctionCall("c1", "search", {
            "q": "x", "n": 3, "f": 2.5, "big": 1e20, "neg": -0.0, "flag": True, "none": None,
            "list": [1, 2.0, "s", {"k": [True]}], "nested": {"z": 1, "a": {"b": []}},
        })),
        m.Part(function_response=m.FunctionResponse("c1", "search", {"items": [{"id": 1}], "count": 1.0})),
    ),
)


def test_domain_and_proto_paths_give_identical_canonical_json() -> None:
    proto = content_to_proto(RICH)
    via_proto = canonical.canonical_json(canonical.content_json(proto))
    assert content_bytes(RICH) == via_proto
    # And the same again after a wire round trip.
    again = content_pb2.Content.FromString(proto.SerializeToString())
    assert canonical.canonical_json(canonical.content_json(again)) == via_proto


def test_inline_data_counts_at_its_raw_length() -> None:
    blob = bytes(1000)
    c = m.Content("user", (m.Part(inline_data=m.Blob("image/png", blob)),))
    encoded = content_bytes(c)
    without_data = len(content_bytes(m.Content("user", (m.Part(inline_data=m.Blob("image/png", b"")),))))
    assert budget_size(c, encoded) == without_data + 1000
    assert len(encoded) > budget_size(c, encoded)  # base64 is larger; the budget speaks of raw bytes


def _sample_parts() -> tuple[RequestParts, list, generation_pb2.Tool, generation_pb2.ToolConfig, content_pb2.Content]:
    keys = DEFAULT_SECRET_KEYS
    tool = generation_pb2.Tool(function_declarations=[generation_pb2.FunctionDeclaration(name="search", description="d")])
    tool.function_declarations[0].parameters.update({"type": "object", "properties": {"q": {"type": "string"}}})
    tool_config = generation_pb2.ToolConfig(mode=generation_pb2.FUNCTION_CALLING_MODE_ANY, allowed_function_names=["search"])
    si = content_pb2.Content(role="system", parts=[content_pb2.Part(text="Be brief.")])
    history = [content_record(RICH, keys), content_record(m.Content("user", (m.Part(text="q"),)), keys)]
    parts = RequestParts(
        model="gemini-x",
        system_instruction=content_record(m.Content("system", (m.Part(text="Be brief."),)), keys),
        tools=[canonical.canonical_json(canonical.tool_json(tool))],
        tool_config=canonical.canonical_json(canonical.tool_config_json(tool_config)),
        generation_config=b'{"temperature":0.5}',
        memory=[],
        inputs=[content_record(m.Content("user", (m.Part(text="now"),)), keys)],
    )
    return parts, history, tool, tool_config, si


def test_prefix_bytes_equal_the_shared_prefix_json() -> None:
    parts, history, tool, tool_config, si = _sample_parts()
    expected = canonical.canonical_json(
        canonical.prefix_json("gemini-x", si, [tool], tool_config, [content_to_proto(c.content) for c in history])
    )
    assert prefix_bytes(parts, history) == expected


def test_prefix_bytes_with_nothing_optional_set() -> None:
    parts = RequestParts("m", None, [], None, None, [], [])
    assert prefix_bytes(parts, []) == canonical.canonical_json(canonical.prefix_json("m", None, [], None, []))


def test_envelope_bytes_are_the_canonical_json_of_the_whole_request() -> None:
    parts, history, *_ = _sample_parts()
    contents = [*history, *parts.inputs]
    raw = envelope_bytes(parts, contents)
    decoded = json.loads(raw)
    assert list(decoded) == sorted(decoded)
    assert canonical.canonical_json(decoded) == raw
    assert decoded["generationConfig"] == {"temperature": 0.5}
    assert [c["role"] for c in decoded["contents"]] == ["model", "user", "user"]


def _uncached(c: m.Content) -> bytes:
    """The canonical JSON as computed before contents kept it (7e4db00)."""
    return canonical.canonical_json(content_dict(c))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content)
def test_kept_canonical_bytes_and_digest_are_the_computed_ones(c: m.Content) -> None:
    expected = _uncached(c)
    digest = hashlib.sha256(expected).digest()
    # Measuring does not keep them; it gives the same values.
    assert peek_bytes(c) == expected
    assert peek_digest(c, peek_bytes(c)) == digest
    assert not hasattr(c, "_canonical")
    first = content_bytes(c)
    assert first == expected
    assert content_bytes(c) is first  # computed once
    assert content_digest(c) == digest
    assert content_digest(c) is content_digest(c)
    assert peek_bytes(c) is first and peek_digest(c, first) == digest
    # Outside repr and pickles: a copy computes the same bytes again.
    copy = pickle.loads(pickle.dumps(c))
    assert repr(copy) == repr(c) and not hasattr(copy, "_canonical")
    assert content_bytes(copy) == first


def test_kept_values_are_outside_equality_and_hashing() -> None:
    a, b = m.Content("user", (m.Part(text="x"),)), m.Content("user", (m.Part(text="x"),))
    content_digest(a)
    assert a == b and hash(a) == hash(b)
    assert not hasattr(b, "_canonical")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content)
def test_records_carry_the_canonical_form_of_the_pruned_content(c: m.Content) -> None:
    r = content_record(c, DEFAULT_SECRET_KEYS)
    again = content_record(c, DEFAULT_SECRET_KEYS)
    expected = _uncached(r.content)
    assert r.canonical == again.canonical == expected
    assert r.digest == again.digest == hashlib.sha256(expected).digest()
    assert r.size == budget_size(r.content, expected)
    measured = measure(m.Event(id="e", author="a", content=c))
    if r.secrets_pruned == 0:
        assert r.content is c and again.canonical is r.canonical  # the content's kept bytes, reused
        assert (measured.digest, measured.size) == (r.digest, r.size if c.parts else 0)
    else:
        assert r.content is not c and not hasattr(c, "_canonical")  # the unpruned content was never encoded
        assert measured.digest == hashlib.sha256(_uncached(c)).digest()
