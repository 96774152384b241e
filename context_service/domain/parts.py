"""The context service's Part and the one place it enumerates Part kinds.

The kinds themselves (names, payload fields, their types) are the shared
table ``agentctx_common.part_kinds``; this module adds the domain side of
each kind: its payload class, the part as its canonical JSON dict (the
stored body's and the cache key's shape), its checks, and the helpers the rest of the
service reads parts by (which kind, its JSON payloads, a text-or-bytes
part). Code elsewhere walks these, never an if-chain over the kinds: a new
Part kind is a row in the shared table, a payload class and a slot of
``Part`` here, and its checks in ``_RULES``.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentctx_common.canonical import json_number
from agentctx_common.errors import FieldViolation
from agentctx_common.part_kinds import BY_NAME, INLINE_DATA, KINDS, NAMES, TEXT, PartKind, part_json
from context_service.domain.json_depth import json_violations

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Blob:
    mime_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class FileData:
    mime_type: str
    file_uri: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    id: str
    name: str
    args: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FunctionResponse:
    id: str
    name: str
    response: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Part:
    """Exactly one of the payload fields is set (one slot per kind, in the
    order of ``agentctx_common.part_kinds.KINDS``)."""

    text: str | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    thought: bool = False
    thought_signature: bytes = b""


# Each kind's payload class, by the kind's index (text: a plain str).
_PAYLOAD_CLASSES: tuple[Callable[..., Any] | None, ...] = (None, Blob, FileData, FunctionCall, FunctionResponse)
_KIND_SLOTS = tuple((k, k.name) for k in KINDS)
_EMPTY: tuple[None, ...] = (None,) * len(KINDS)


_TEXT, _INLINE_DATA, _FILE_DATA, _FUNCTION_CALL, _FUNCTION_RESPONSE = KINDS


def kind_of(p: Part) -> PartKind | None:
    """The kind of the part's payload; None when no payload is set. (The
    hot path of every conversion: attribute tests, not a loop.)"""
    if p.text is not None:
        return _TEXT
    if p.inline_data is not None:
        return _INLINE_DATA
    if p.file_data is not None:
        return _FILE_DATA
    if p.function_call is not None:
        return _FUNCTION_CALL
    if p.function_response is not None:
        return _FUNCTION_RESPONSE
    return None


def payload_of(kind: PartKind, values: list[Any]) -> Any:
    """The domain payload of ``kind`` from its fields' values, in the
    table's order (text: the one string)."""
    cls = _PAYLOAD_CLASSES[kind.index]
    return values[0] if cls is None else cls(*values)


def make(kind: PartKind | None, payload: Any, thought: bool = False, thought_signature: bytes = b"") -> Part:
    """A part of ``kind`` carrying ``payload``."""
    if kind is None:
        return Part(thought=thought, thought_signature=thought_signature)
    s: list[Any] = list(_EMPTY)
    s[kind.index] = payload
    return Part(s[0], s[1], s[2], s[3], s[4], thought, thought_signature)


def data_part(text: bool, mime_type: str, data: bytes) -> Part:
    """A part carrying a content's bytes: its text when it is text, else
    the bytes as inline data with their media type."""
    return make(TEXT, data.decode()) if text else make(INLINE_DATA, Blob(mime_type, data))


def data_of(p: Part) -> tuple[bool, str, bytes] | None:
    """A text or inline-data part's (is text, media type, bytes); None for
    other kinds. The media type of a text part is ""."""
    if p.text is not None:
        return True, "", p.text.encode()
    if p.inline_data is not None:
        return False, p.inline_data.mime_type, p.inline_data.data
    return None


def inline_bytes(p: Part) -> int:
    """Raw bytes the part carries inline (0 for other kinds)."""
    return len(p.inline_data.data) if p.inline_data is not None else 0


# --- JSON payloads (tool arguments and results) --------------------------------


def json_payloads(p: Part) -> Iterator[tuple[PartKind, str, JsonObject]]:
    """The part's JSON-object payload fields: (kind, field name, value)."""
    kind = kind_of(p)
    if kind is not None and kind.json_fields:
        payload = getattr(p, kind.name)
        for name in kind.json_fields:
            yield kind, name, getattr(payload, name)


def map_json(p: Part, fn: Callable[[JsonObject], JsonObject], *, keep_signature: bool = True) -> Part:
    """``p`` with ``fn`` applied to each JSON payload field, and without its
    thought signature unless ``keep_signature``; ``p`` itself when nothing
    changed."""
    kind = kind_of(p)
    payload = getattr(p, kind.name) if kind is not None else None
    changed = False
    if kind is not None and kind.json_at:
        values = list(kind.values(payload))
        for i in kind.json_at:
            new = fn(values[i])
            if new is not values[i]:
                values[i] = new
                changed = True
        if changed:
            payload = payload_of(kind, values)
    if not changed and (keep_signature or not p.thought_signature):
        return p
    return make(kind, payload, p.thought, p.thought_signature if keep_signature else b"")


# --- the canonical JSON dict (the stored body's and the cache key's shape) ---------


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


def to_json(p: Part) -> dict[str, Any]:
    """The part's canonical JSON dict (``agentctx_common.part_kinds.part_json``:
    camelCase keys, bytes as base64, numbers as a Struct carries them): the
    stored body's parts and the cache key's are this one shape."""
    kind = kind_of(p)
    payload = getattr(p, kind.name) if kind is not None else None
    return part_json(kind, payload, p.thought, p.thought_signature, json_value)


def from_json(d: dict[str, Any]) -> Part:
    """The part ``to_json`` made."""
    thought = d.get("thought", False)
    signature = base64.b64decode(d.get("thoughtSignature", ""))
    for kind in KINDS:
        if kind.camel in d:
            value = d[kind.camel]
            if kind.fields:
                values = [value[camel] for camel in kind.camels]
                for i in kind.bytes_at:
                    values[i] = base64.b64decode(values[i])
                value = payload_of(kind, values)
            return make(kind, value, thought, signature)
    return Part(thought=thought, thought_signature=signature)


# --- checks ----------------------------------------------------------------------

MAX_URI_CHARS = 4096
FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
# Tool call ids come from providers and agents in many shapes; any printable
# ASCII without spaces is accepted.
CALL_ID = re.compile(r"[!-~]{1,128}")
MIME_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")
_NAME_RULE = "must be 1-128 characters of [A-Za-z0-9_.:-], starting with a letter or _"
_Check = Callable[[Part, Any, str, str, set[str]], list[FieldViolation]]


def _text(p: Part, text: str, role: str, path: str, seen_calls: set[str]) -> list[FieldViolation]:
    return [FieldViolation(path, "must not be empty")] if not text and not p.thought_signature else []


def _inline_data(p: Part, blob: Blob, role: str, path: str, seen_calls: set[str]) -> list[FieldViolation]:
    v = []
    if not MIME_TYPE.fullmatch(blob.mime_type):
        v.append(FieldViolation(f"{path}.mime_type", "must be a media type such as image/png"))
    if not blob.data:
        v.append(FieldViolation(f"{path}.data", "must not be empty"))
    return v


def _file_data(p: Part, fd: FileData, role: str, path: str, seen_calls: set[str]) -> list[FieldViolation]:
    v = []
    if not fd.file_uri or len(fd.file_uri) > MAX_URI_CHARS:
        v.append(FieldViolation(f"{path}.file_uri", f"is required, at most {MAX_URI_CHARS} characters"))
    if fd.mime_type and not MIME_TYPE.fullmatch(fd.mime_type):
        v.append(FieldViolation(f"{path}.mime_type", "must be a media type such as application/pdf"))
    return v


def _function_call(p: Part, fc: FunctionCall, role: str, path: str, seen_calls: set[str]) -> list[FieldViolation]:
    v = []
    if role != "model":
        v.append(FieldViolation(path, "is allowed in role 'model' content only"))
    if not FUNCTION_NAME.fullmatch(fc.name):
        v.append(FieldViolation(f"{path}.name", _NAME_RULE))
    if fc.id:
        if not CALL_ID.fullmatch(fc.id):
            v.append(FieldViolation(f"{path}.id", "must be 1-128 printable ASCII characters without spaces"))
        elif fc.id in seen_calls:
            v.append(FieldViolation(f"{path}.id", "repeats another call's id in this event"))
        seen_calls.add(fc.id)
    return v + json_violations(fc.args, f"{path}.args")


def _function_response(p: Part, fr: FunctionResponse, role: str, path: str,
                       seen_calls: set[str]) -> list[FieldViolation]:
    v = []
    if role != "user":
        v.append(FieldViolation(path, "is allowed in role 'user' content only"))
    if not FUNCTION_NAME.fullmatch(fr.name):
        v.append(FieldViolation(f"{path}.name", _NAME_RULE))
    if not CALL_ID.fullmatch(fr.id):
        v.append(FieldViolation(f"{path}.id", "is required: the id of the function call it answers"))
    return v + json_violations(fr.response, f"{path}.response")


# Each kind's checks, by the kind's index.
_RULES: tuple[_Check, ...] = (_text, _inline_data, _file_data, _function_call, _function_response)
_ONE_OF = "must set exactly one of " + ", ".join(NAMES)


def part_violations(p: Part, role: str, path: str, seen_calls: set[str]) -> list[FieldViolation]:
    """What is wrong with a client's part (exactly one payload, each kind's
    rules); ``seen_calls`` collects the event's call ids."""
    set_kinds = [kind for kind, name in _KIND_SLOTS if getattr(p, name) is not None]
    if len(set_kinds) != 1:
        return [FieldViolation(path, _ONE_OF)]
    kind = set_kinds[0]
    return _RULES[kind.index](p, getattr(p, kind.name), role, f"{path}.{kind.name}", seen_calls)


__all__ = [
    "BY_NAME", "KINDS", "Blob", "FileData", "FunctionCall", "FunctionResponse", "JsonObject", "Part", "PartKind",
    "data_of", "data_part", "from_json", "inline_bytes", "json_payloads", "json_value", "kind_of", "make", "map_json",
    "part_violations", "payload_of", "to_json",
]
