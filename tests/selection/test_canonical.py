"""The domain canonical form equals the shared proto canonical form, byte
for byte, so both services fingerprint the same bytes."""

from __future__ import annotations

import json

from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common import canonical
from context_service.domain import model as m
from context_service.domain.selection import DEFAULT_SECRET_KEYS, RequestParts, content_record
from context_service.domain.selection.canonical import budget_size, content_bytes
from context_service.domain.selection.envelope import envelope_bytes, prefix_bytes
from context_service.mapping.convert import content_to_proto

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
