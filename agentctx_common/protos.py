"""Protobuf helpers that do not depend on grpc."""

from __future__ import annotations

from typing import Any

from google.protobuf import message as _message
from google.protobuf.unknown_fields import UnknownFieldSet

from agentctx_common.errors import FieldViolation


def unknown_field_violations(msg: _message.Message, path: str) -> list[FieldViolation]:
    """One violation per unknown field at any depth of ``msg``.

    A client built against a newer or different schema may send fields this
    server does not know; in policy and config messages silently ignoring
    them would change behaviour the caller asked for, so they are rejected.
    """
    unknown = UnknownFieldSet(msg)
    violations = [
        FieldViolation(path or "(request)", f"unknown field number {unknown[i].field_number}")
        for i in range(len(unknown))
    ]
    for field, value in msg.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        child = f"{path}.{field.name}" if path else field.name
        if field.is_repeated:
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                continue
            for i, item in enumerate(value):
                violations += unknown_field_violations(item, f"{child}[{i}]")
        else:
            violations += unknown_field_violations(value, child)
    return violations


_TIMESTAMP = "google.protobuf.Timestamp"
_DURATION = "google.protobuf.Duration"
# JSON values: any content is valid, and walking them would cost per event.
_SKIP = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})
# 0001-01-01T00:00:00Z .. 9999-12-31T23:59:58Z: the protobuf range, less the
# last second, which float rounding turns into year 10000 in Python.
_MIN_SECONDS, _MAX_SECONDS = -62135596800, 253402300798
_MAX_DURATION_SECONDS = 315576000000
_MAY_HOLD: dict[str, bool] = {}


def _may_hold_bad_values(descriptor: Any, seen: frozenset[str] = frozenset()) -> bool:
    """Whether messages of this type can hold an enum, a Timestamp or a
    Duration at any depth (most content cannot: its walk is skipped)."""
    name = descriptor.full_name
    cached = _MAY_HOLD.get(name)
    if cached is not None:
        return cached
    if name in (_TIMESTAMP, _DURATION):
        result = True
    elif name in _SKIP or name in seen:
        result = False
    else:
        result = any(
            f.type == f.TYPE_ENUM
            or (f.type == f.TYPE_MESSAGE and _may_hold_bad_values(f.message_type, seen | {name}))
            for f in descriptor.fields
        )
    if not seen:
        _MAY_HOLD[name] = result
    return result


def value_violations(msg: _message.Message, path: str) -> list[FieldViolation]:
    """Unknown enum numbers and out-of-range Timestamps and Durations at
    any depth of ``msg``.

    proto3 keeps enum numbers it does not know and lets a Timestamp hold any
    int64; converting either to Python values fails, so requests are checked
    first and such values become field violations instead of INTERNAL.
    """
    name = msg.DESCRIPTOR.full_name
    if name == _TIMESTAMP:
        ok = _MIN_SECONDS <= msg.seconds <= _MAX_SECONDS and 0 <= msg.nanos < 1_000_000_000  # type: ignore[attr-defined]
        return [] if ok else [FieldViolation(path, "is not a valid timestamp")]
    if name == _DURATION:
        seconds, nanos = msg.seconds, msg.nanos  # type: ignore[attr-defined]
        ok = abs(seconds) <= _MAX_DURATION_SECONDS and abs(nanos) < 1_000_000_000 and seconds * nanos >= 0
        return [] if ok else [FieldViolation(path, "is not a valid duration")]
    violations: list[FieldViolation] = []
    for field, value in msg.ListFields():
        child = f"{path}.{field.name}" if path else field.name
        if field.type == field.TYPE_ENUM:
            for i, number in enumerate(value if field.is_repeated else [value]):
                if field.enum_type is None or field.enum_type.values_by_number.get(number) is None:
                    where = f"{child}[{i}]" if field.is_repeated else child
                    violations.append(FieldViolation(where, f"unknown enum value {number}"))
        elif field.type == field.TYPE_MESSAGE and _may_hold_bad_values(field.message_type):
            if not field.is_repeated:
                violations += value_violations(value, child)
            elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
                for i, item in enumerate(value):
                    violations += value_violations(item, f"{child}[{i}]")
    return violations
