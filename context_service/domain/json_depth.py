"""How deeply a JSON value (tool args, tool results, custom metadata,
session state) may nest.

Every JSON level costs protobuf nesting (an object level is three messages:
Struct, map entry, Value), and the protobuf decoders stop at 100 levels. A
value the context service accepts travels inside deeper messages than the
one it arrived in (an event's args reach the cache service inside
StreamGenerateContentRequest, one level deeper than AppendEventRequest), so
a value right under the decoder's limit at AppendEvent made every later
StreamGenerate fail. The limit here is checked at every entry point and
sits well below what every internal message path carries.

Depth counts objects and arrays: ``{}`` and ``[]`` are 1, ``{"a": [1]}``
is 2, a scalar is 0.
"""

from __future__ import annotations

import math
from typing import Any

from agentctx_common.errors import FieldViolation

DEFAULT_MAX_JSON_DEPTH = 20
# The most a setting may allow. Every internal message path carries a value
# of this depth with room to spare (tests/turns/test_hardening_json_depth.py
# runs each path at it); objects at 32 levels break StreamGenerate.
MAX_JSON_DEPTH_CEILING = 28


def exceeds_depth(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit``; stops at the first
    container past it."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth += 1
        if depth > limit:
            return True
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list, tuple)))
    return False


def depth_violations(value: Any, path: str, limit: int) -> list[FieldViolation]:
    if exceeds_depth(value, limit):
        return [FieldViolation(path, f"nests objects and arrays more than {limit} levels deep")]
    return []


def json_violations(value: Any, path: str) -> list[FieldViolation]:
    """NaN and infinities cannot be stored as JSON or fingerprinted."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [FieldViolation(path, "numbers must be finite")]
    if isinstance(value, dict):
        return [v for k, item in value.items() for v in json_violations(item, f"{path}.{k}")]
    if isinstance(value, list):
        return [v for i, item in enumerate(value) for v in json_violations(item, f"{path}[{i}]")]
    return []
