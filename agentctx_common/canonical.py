"""Canonical JSON and SHA-256 fingerprints shared by both services.

Both services fingerprint the same structures (a prefix, a history), so the
canonical shape lives here: Gemini-REST-like camelCase dicts, keys sorted, no
whitespace, UTF-8, inline bytes as base64, integral numbers as integers.
``content_json`` turns a proto Content into that shape; the context service
builds it from its domain types through the same encoder
(``agentctx_common.part_kinds.part_json``), so there is one encoding.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from google.protobuf import struct_pb2

from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common import part_kinds
from agentctx_common.part_kinds import b64 as b64

_MAX_SAFE_INT = 2**53


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def fingerprint(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def json_number(n: float) -> int | float:
    """A Struct number (always a double) in canonical form: integral values
    as integers, so 3 and 3.0 canonicalize alike."""
    return int(n) if n.is_integer() and abs(n) < _MAX_SAFE_INT else n


def value_to_py(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return json_number(value.number_value)
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [value_to_py(v) for v in value.list_value.values]
    return None


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return {k: value_to_py(v) for k, v in struct.fields.items()}


def part_json(p: content_pb2.Part) -> dict[str, Any]:
    name = p.WhichOneof("data")
    kind = part_kinds.BY_NAME[name] if name is not None else None
    payload = getattr(p, name) if name is not None else None
    return part_kinds.part_json(kind, payload, p.thought, p.thought_signature, struct_to_dict)


def content_json(c: content_pb2.Content) -> dict[str, Any]:
    return {"role": c.role, "parts": [part_json(p) for p in c.parts]}


def tool_json(t: generation_pb2.Tool) -> dict[str, Any]:
    return {
        "functionDeclarations": [
            {
                "name": f.name,
                "description": f.description,
                "parameters": struct_to_dict(f.parameters),
                **({"response": struct_to_dict(f.response)} if f.HasField("response") else {}),
            }
            for f in t.function_declarations
        ]
    }


def tool_config_json(tc: generation_pb2.ToolConfig) -> dict[str, Any]:
    return {
        "mode": generation_pb2.FunctionCallingMode.Name(tc.mode).removeprefix("FUNCTION_CALLING_MODE_"),
        "allowedFunctionNames": list(tc.allowed_function_names),
    }


def prefix_json(
    model: str,
    system_instruction: content_pb2.Content | None,
    tools: Iterable[generation_pb2.Tool],
    tool_config: generation_pb2.ToolConfig | None,
    history: Iterable[content_pb2.Content],
) -> dict[str, Any]:
    """The canonical shape of a cacheable prefix. Its fingerprint is the
    prefix fingerprint both services report."""
    return {
        "model": model,
        "systemInstruction": content_json(system_instruction) if system_instruction is not None else None,
        "tools": [tool_json(t) for t in tools],
        "toolConfig": tool_config_json(tool_config) if tool_config is not None else None,
        "history": [content_json(c) for c in history],
    }
