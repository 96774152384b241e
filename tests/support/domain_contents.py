"""Hypothesis strategies for domain contents: every Part kind, thought
parts and signatures, JSON payloads with the values clients send (ints,
floats including non-finite ones, nesting, unicode keys)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from agentctx_common import part_kinds
from context_service.domain import model as m
from context_service.domain import parts

_SCALAR: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
# Keys include secret ones, so pruning has something to drop.
_KEY: st.SearchStrategy[str] = st.one_of(st.text(max_size=5), st.sampled_from(["api_key", "password", "token"]))
json_value: st.SearchStrategy[Any] = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEY, inner, max_size=3)),
    max_leaves=8,
)
json_object: st.SearchStrategy[dict[str, Any]] = st.dictionaries(_KEY, json_value, max_size=4)

_VALUES: dict[part_kinds.FieldType, st.SearchStrategy[Any]] = {
    part_kinds.FieldType.STR: st.text(max_size=12),
    part_kinds.FieldType.BYTES: st.binary(max_size=24),
    part_kinds.FieldType.JSON: json_object,
}


@st.composite
def part(draw: st.DrawFn) -> m.Part:
    """A part of any kind (walked from the kind table, so a new kind is
    drawn too), or without a payload, possibly a thought, possibly signed."""
    kind = draw(st.sampled_from((None, *part_kinds.KINDS)))
    payload: Any = None
    if kind is not None:
        payload = (
            draw(st.text(max_size=20))
            if not kind.fields
            else parts.payload_of(kind, [draw(_VALUES[f.type]) for f in kind.fields])
        )
    return parts.make(kind, payload, draw(st.booleans()), draw(st.binary(max_size=6)))


content: st.SearchStrategy[m.Content] = st.builds(
    m.Content, st.sampled_from(["user", "model", "system", "tool"]), st.lists(part(), max_size=5).map(tuple)
)
