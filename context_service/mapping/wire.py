"""Protobuf wire helpers: a content's transport forms, cached with its
record, so that a response can be assembled by concatenating bytes."""

from __future__ import annotations

from agentctx.type.v1 import content_pb2
from context_service.domain.model import Content
from context_service.mapping.convert import content_to_proto

CONTENTS_FIELD = 3  # ModelRequest.contents
INSTRUCTION_FIELD = 2  # ModelRequest.system_instruction


class Rendered:
    """A content in its transport forms: the proto message, and its wire
    bytes as one entry of ``ModelRequest.contents`` (field 3); as the
    system instruction (field 2) when first asked for."""

    __slots__ = ("_instruction", "proto", "wire")

    def __init__(self, proto: content_pb2.Content) -> None:
        self.proto = proto
        self.wire = wire_field(CONTENTS_FIELD, proto.SerializeToString())
        self._instruction: bytes | None = None

    @property
    def instruction_wire(self) -> bytes:
        if self._instruction is None:
            self._instruction = wire_field(INSTRUCTION_FIELD, self.proto.SerializeToString())
        return self._instruction


def field_head(number: int, size: int) -> bytes:
    """The tag and length of a length-delimited field of ``size`` bytes,
    for a payload joined after it (no copy of the payload to make one)."""
    return _varint((number << 3) | 2) + _varint(size)


def wire_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field: tag, length, payload."""
    return field_head(number, len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def render(content: Content) -> Rendered:
    """The ``selection.Render`` the server's records use."""
    return Rendered(content_to_proto(content))
