"""The Part kinds are listed once per process.

``agentctx_common/part_kinds.py`` is the table every shape of a part is
read by; these tests hold it to the proto (a kind added to the oneof fails
here, by name, until the table and the domain Part have it) and keep the
number of hand-written files that enumerate the kinds from growing back.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

from google.protobuf import descriptor

from agentctx.type.v1 import content_pb2
from agentctx_common import part_kinds
from context_service.domain import parts

ROOT = pathlib.Path(__file__).resolve().parents[2]
FD = descriptor.FieldDescriptor


def _field_type(f: descriptor.FieldDescriptor) -> part_kinds.FieldType:
    if f.type == FD.TYPE_BYTES:
        return part_kinds.FieldType.BYTES
    if f.type == FD.TYPE_MESSAGE and f.message_type.full_name == "google.protobuf.Struct":
        return part_kinds.FieldType.JSON
    assert f.type == FD.TYPE_STRING, f"{f.full_name}: a payload field type the kind table has no FieldType for"
    return part_kinds.FieldType.STR


def test_the_kind_table_is_the_proto_oneof() -> None:
    oneof = content_pb2.Part.DESCRIPTOR.oneofs_by_name["data"]
    assert [f.name for f in oneof.fields] == list(part_kinds.NAMES), "Part.data members and the kind table differ"
    for f, kind in zip(oneof.fields, part_kinds.KINDS, strict=True):
        assert (kind.camel, kind.index) == (f.json_name, part_kinds.KINDS.index(kind)), kind.name
        if f.type != FD.TYPE_MESSAGE:
            assert kind.fields == (), f"{kind.name}: a scalar payload has no fields"
            continue
        expected = [(s.name, s.json_name, _field_type(s)) for s in f.message_type.fields]
        assert [(p.name, p.camel, p.type) for p in kind.fields] == expected, f"{kind.name}: payload fields differ"


def test_the_domain_part_has_one_slot_per_kind_in_table_order() -> None:
    slots = [f.name for f in dataclasses.fields(parts.Part)][: len(part_kinds.KINDS)]
    assert slots == list(part_kinds.NAMES)
    for kind in part_kinds.KINDS:
        if kind.fields:
            payload = parts.payload_of(kind, [b"" if f.type is part_kinds.FieldType.BYTES else "" for f in kind.fields])
            assert [f.name for f in dataclasses.fields(payload)] == [f.name for f in kind.fields], kind.name
        part = parts.make(kind, payload if kind.fields else "x")
        assert parts.kind_of(part) is kind
        assert parts.from_json(parts.to_json(part)) == part


# A file enumerates the Part kinds when it names at least three of the four
# non-text kinds (snake_case or camelCase). The ones that may, and why.
_KIND_NAMES = [re.compile(rx) for rx in (r"inline_?[dD]ata|inlineData", r"file_?[dD]ata|fileData",
                                         r"function_?[cC]all\b|functionCall\b",
                                         r"function_?[rR]esponse\b|functionResponse\b")]
ALLOWED = {
    "agentctx_common/part_kinds.py": "the table",
    "context_service/domain/parts.py": "the context service's Part: payload classes and per-kind checks",
    "cache_service/api/convert.py": "the cache service's edge",
    "cache_service/providers/anthropic/wire.py": "a provider's wire shape",
    "cache_service/providers/gemini/wire.py": "a provider's wire shape",
    "cache_service/providers/openai/wire.py": "a provider's wire shape",
    "clients/adk/agentctx_adk/_convert.py": "the ADK client's types",
}


def _enumerating_files() -> set[str]:
    found = set()
    for top in ("agentctx_common", "context_service", "cache_service", "clients"):
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if any(part in {"gen", "build", "tests"} or part.startswith(".") for part in path.relative_to(ROOT).parts):
                continue
            if "_pb2" in rel:
                continue
            text = path.read_text()
            if sum(1 for rx in _KIND_NAMES if rx.search(text)) >= 3:
                found.add(rel)
    return found


def test_no_new_file_enumerates_the_part_kinds() -> None:
    extra = sorted(_enumerating_files() - set(ALLOWED))
    assert not extra, f"enumerate the Part kinds outside the kind table: {extra} (walk part_kinds / domain.parts)"
