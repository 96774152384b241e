"""Domain content in the shared canonical JSON shape.

The shape (Gemini-REST-like camelCase, inline bytes as base64, integral
numbers as integers) is built by one encoder,
``agentctx_common.part_kinds.part_json``, from proto parts
(``agentctx_common.canonical``) and here from domain parts, so both
services fingerprint identical bytes; only the JSON payloads' plain values
(``json_value`` here, a Struct's there) are made per shape.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from agentctx_common import part_kinds
from agentctx_common.canonical import canonical_json, json_number
from context_service.domain import model as m
from context_service.domain import parts


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
    kind = parts.kind_of(p)
    payload = getattr(p, kind.name) if kind is not None else None
    return part_kinds.part_json(kind, payload, p.thought, p.thought_signature, json_value)


def content_dict(c: m.Content) -> dict[str, Any]:
    return {"role": c.role, "parts": [part_dict(p) for p in c.parts]}


def canonical_form(c: m.Content) -> tuple[bytes, bytes]:
    """The content's canonical JSON and its SHA-256, computed once per
    content value and kept on it (a Content is immutable)."""
    kept: tuple[bytes, bytes] | None = getattr(c, "_canonical", None)
    if kept is None:
        canonical = canonical_json(content_dict(c))
        kept = (canonical, hashlib.sha256(canonical).digest())
        object.__setattr__(c, "_canonical", kept)  # a frozen dataclass: its derived slot, set once
    return kept


def content_bytes(c: m.Content) -> bytes:
    return canonical_form(c)[0]


def content_digest(c: m.Content) -> bytes:
    return canonical_form(c)[1]


def peek_bytes(c: m.Content) -> bytes:
    """``content_bytes(c)``, the kept value when already computed, else
    computed without keeping it: for callers that hold contents long and
    only measure them (compaction views), so the contents they hold stay
    their own size."""
    kept: tuple[bytes, bytes] | None = getattr(c, "_canonical", None)
    return kept[0] if kept is not None else canonical_json(content_dict(c))


def peek_digest(c: m.Content, canonical: bytes) -> bytes:
    """``content_digest(c)`` given ``peek_bytes(c)``, without keeping it."""
    kept: tuple[bytes, bytes] | None = getattr(c, "_canonical", None)
    return kept[1] if kept is not None else hashlib.sha256(canonical).digest()


def budget_size(c: m.Content, canonical: bytes) -> int:
    """Bytes a content counts against budgets: its canonical JSON, with each
    inline blob counted at its raw length (in full) instead of its base64
    text, so a budget speaks of the bytes the caller sent."""
    size = len(canonical)
    for p in c.parts:
        raw = parts.inline_bytes(p)
        if raw:
            size += raw - 4 * ((raw + 2) // 3)
    return size
