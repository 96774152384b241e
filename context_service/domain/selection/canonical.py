"""Domain content in the shared canonical JSON shape.

The shape (Gemini-REST-like camelCase, inline bytes as base64, integral
numbers as integers) is built by one encoder,
``agentctx_common.part_kinds.part_json``, from proto parts
(``agentctx_common.canonical``) and from domain parts (``parts.to_json``),
so both services fingerprint identical bytes; only the JSON payloads' plain
values (``parts.json_value``, a Struct's there) are made per shape. The
stored body of an event holds its content's canonical JSON
(``storage/codec.py``), so contents read back keep it
(``content_from_canonical``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from agentctx_common.canonical import canonical_json
from context_service.domain import model as m
from context_service.domain import parts


def content_dict(c: m.Content) -> dict[str, Any]:
    return {"role": c.role, "parts": [parts.to_json(p) for p in c.parts]}


def content_from_canonical(d: dict[str, Any], canonical: bytes) -> m.Content:
    """The content whose canonical JSON is ``canonical`` (``d``, that JSON
    parsed), keeping it as ``canonical_form`` would (its digest follows on
    first use): a stored body holds these bytes, so a content read from
    storage is never encoded again."""
    c = m.Content(d["role"], tuple(parts.from_json(p) for p in d["parts"]))
    object.__setattr__(c, "_canonical", (canonical, b""))
    return c


def canonical_form(c: m.Content) -> tuple[bytes, bytes]:
    """The content's canonical JSON and its SHA-256, computed once per
    content value and kept on it (a Content is immutable)."""
    kept: tuple[bytes, bytes] | None = getattr(c, "_canonical", None)
    if kept is None or not kept[1]:
        canonical = canonical_json(content_dict(c)) if kept is None else kept[0]
        kept = (canonical, hashlib.sha256(canonical).digest())
        object.__setattr__(c, "_canonical", kept)  # a frozen dataclass: its derived slot
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
    return kept[1] if kept is not None and kept[1] else hashlib.sha256(canonical).digest()


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
