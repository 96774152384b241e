"""Domain content in the shared canonical JSON shape.

The shape (Gemini-REST-like camelCase, inline bytes as base64, integral
numbers as integers) is defined by ``agentctx_common.canonical`` for proto
messages; this is the same shape built from domain values, so that both
services fingerprint identical bytes. A test holds the two paths equal.
"""

from __future__ import annotations

import math
from typing import Any

from agentctx_common.canonical import b64, canonical_json, json_number
from context_service.domain import model as m


def json_value(value: Any) -> Any:
    """A JSON value as a protobuf Struct would carry it: numbers are doubles,
    so an integral one is written as an integer, whatever its Python type."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        n = float(value)
        if not math.isfinite(n):
            return None  # a Struct cannot carry NaN or infinity
        return json_number(n)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def part_dict(p: m.Part) -> dict[str, Any]:
    out: dict[str, Any]
    if p.text is not None:
        out = {"text": p.text}
    elif p.inline_data is not None:
        out = {"inlineData": {"mimeType": p.inline_data.mime_type, "data": b64(p.inline_data.data)}}
    elif p.file_data is not None:
        out = {"fileData": {"mimeType": p.file_data.mime_type, "fileUri": p.file_data.file_uri}}
    elif p.function_call is not None:
        fc = p.function_call
        out = {"functionCall": {"id": fc.id, "name": fc.name, "args": json_value(fc.args)}}
    elif p.function_response is not None:
        fr = p.function_response
        out = {"functionResponse": {"id": fr.id, "name": fr.name, "response": json_value(fr.response)}}
    else:
        out = {}
    if p.thought:
        out["thought"] = True
    if p.thought_signature:
        out["thoughtSignature"] = b64(p.thought_signature)
    return out


def content_dict(c: m.Content) -> dict[str, Any]:
    return {"role": c.role, "parts": [part_dict(p) for p in c.parts]}


def content_bytes(c: m.Content) -> bytes:
    return canonical_json(content_dict(c))


def budget_size(c: m.Content, canonical: bytes) -> int:
    """Bytes a content counts against budgets: its canonical JSON, with each
    inline blob counted at its raw length (in full) instead of its base64
    text, so a budget speaks of the bytes the caller sent."""
    size = len(canonical)
    for p in c.parts:
        if p.inline_data is not None:
            raw = len(p.inline_data.data)
            size += raw - 4 * ((raw + 2) // 3)
    return size
