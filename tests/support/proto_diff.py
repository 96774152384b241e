"""Which fields of a sent protobuf message a received one lost, by path
(``Event.usage.cache_write_tokens``): the comparison of the field-coverage
contract (tests/foundation/test_field_coverage.py), shared with its ADK
layer (tests/adk/adk_field_coverage_checks.py, which runs in the ADK venv
from a copy beside this file, so it needs nothing but protobuf)."""

from __future__ import annotations

from google.protobuf import message

# Compared whole, as values: their own fields are not the contract's.
OPAQUE = {"google.protobuf.Struct", "google.protobuf.Timestamp", "google.protobuf.Duration"}


def lost(sent: message.Message, got: message.Message, path: str | None = None) -> list[str]:
    """The field paths set in ``sent`` whose value ``got`` does not hold."""
    path = path or sent.DESCRIPTOR.name
    out: list[str] = []
    for field, value in sent.ListFields():
        here, other = f"{path}.{field.name}", getattr(got, field.name)
        if field.message_type is None or field.message_type.full_name in OPAQUE:
            if not field.is_repeated and field.message_type is not None and not got.HasField(field.name):
                out.append(here)
            elif list(value) != list(other) if field.is_repeated else value != other:
                out.append(here)
        elif field.is_repeated:
            if len(other) < len(value):
                out.append(here)
            for a, b in zip(value, other, strict=False):
                out += lost(a, b, here)
        elif not got.HasField(field.name):
            out.append(here)
        else:
            out += lost(value, other, here)
    return list(dict.fromkeys(out))
