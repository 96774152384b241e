"""The kinds of a Part: the one table both services read the Part oneof by.

``agentctx.type.v1.Part`` carries one payload of five kinds (its ``data``
oneof). Every shape of a part in this repository (the proto, the context
service's domain value, the canonical JSON both services fingerprint and
the context service stores) names a kind by the same two spellings and its payload by the
same fields, so the kinds are listed once, here, with their payload fields
and each field's type; conversions walk the table instead of repeating an
if-chain over the oneof. A new kind is a row here (plus its domain payload
class in ``context_service/domain/parts.py``).

The canonical JSON of a part (Gemini-REST-like camelCase, bytes as base64)
is built by ``part_json`` alone, from either shape: proto parts
(``agentctx_common.canonical``) and domain parts
(``context_service.domain.selection.canonical``) differ only in how their
JSON payloads (a Struct, a dict) become plain values.

No protobuf here: the context service's domain imports this module.
"""

from __future__ import annotations

import base64
import enum
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class FieldType(enum.Enum):
    STR = "str"
    BYTES = "bytes"  # base64 in every JSON shape
    JSON = "json"  # a JSON object (a Struct in the proto)


@dataclass(frozen=True, slots=True)
class PayloadField:
    name: str  # the proto and domain attribute
    camel: str  # the canonical-JSON key (the stored JSON's too)
    type: FieldType


@dataclass(frozen=True, slots=True)
class PartKind:
    name: str  # the oneof member, the domain Part attribute
    camel: str  # the canonical-JSON key (the stored JSON's too)
    index: int  # position among the kinds (the domain Part's payload slots)
    fields: tuple[PayloadField, ...]  # () when the payload is a plain string
    # Derived from ``fields``, for the conversions' hot paths:
    json_fields: tuple[str, ...]  # names of the JSON-object fields
    names: tuple[str, ...]  # field names, in order
    camels: tuple[str, ...]  # their canonical keys
    values: Callable[[Any], tuple[Any, ...]]  # a payload's field values (proto or domain), in order
    bytes_at: tuple[int, ...]  # positions of the bytes fields
    json_at: tuple[int, ...]  # positions of the JSON-object fields


def _kind(name: str, camel: str, index: int, *fields: PayloadField) -> PartKind:
    names = tuple(f.name for f in fields)
    getter = operator.attrgetter(*names) if len(names) > 1 else (lambda payload: (getattr(payload, names[0]),)
                                                                   if names else ())
    return PartKind(
        name, camel, index, fields,
        json_fields=tuple(f.name for f in fields if f.type is FieldType.JSON),
        names=names, camels=tuple(f.camel for f in fields), values=getter,
        bytes_at=tuple(i for i, f in enumerate(fields) if f.type is FieldType.BYTES),
        json_at=tuple(i for i, f in enumerate(fields) if f.type is FieldType.JSON),
    )


_S, _B, _J = FieldType.STR, FieldType.BYTES, FieldType.JSON

KINDS: tuple[PartKind, ...] = (
    _kind("text", "text", 0),
    _kind("inline_data", "inlineData", 1, PayloadField("mime_type", "mimeType", _S), PayloadField("data", "data", _B)),
    _kind("file_data", "fileData", 2, PayloadField("mime_type", "mimeType", _S), PayloadField("file_uri", "fileUri", _S)),
    _kind("function_call", "functionCall", 3, PayloadField("id", "id", _S), PayloadField("name", "name", _S),
          PayloadField("args", "args", _J)),
    _kind("function_response", "functionResponse", 4, PayloadField("id", "id", _S), PayloadField("name", "name", _S),
          PayloadField("response", "response", _J)),
)
BY_NAME: dict[str, PartKind] = {k.name: k for k in KINDS}
NAMES: tuple[str, ...] = tuple(k.name for k in KINDS)
TEXT = BY_NAME["text"]
INLINE_DATA = BY_NAME["inline_data"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def part_json(kind: PartKind | None, payload: Any, thought: bool, signature: bytes,
              json_of: Callable[[Any], Any]) -> dict[str, Any]:
    """The canonical JSON of a part of ``kind`` (None: no payload) whose
    payload is ``payload`` (a string for text, else an object with the
    kind's fields as attributes); ``json_of`` turns a JSON field's value
    into plain canonical values."""
    out: dict[str, Any]
    if kind is None:
        out = {}
    elif not kind.fields:
        out = {kind.camel: payload}
    else:
        values = list(kind.values(payload))
        for i in kind.bytes_at:
            values[i] = b64(values[i])
        for i in kind.json_at:
            values[i] = json_of(values[i])
        out = {kind.camel: dict(zip(kind.camels, values, strict=True))}
    if thought:
        out["thought"] = True
    if signature:
        out["thoughtSignature"] = b64(signature)
    return out
