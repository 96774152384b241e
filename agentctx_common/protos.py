"""Protobuf helpers that do not depend on grpc."""

from __future__ import annotations

from google.protobuf import message as _message
from google.protobuf.unknown_fields import UnknownFieldSet

from agentctx_common.errors import FieldViolation


def unknown_field_violations(msg: _message.Message, path: str) -> list[FieldViolation]:
    """One violation per unknown field at any depth of ``msg``.

    A client built against a newer or different schema may send fields this
    server does not know; in policy and config messages silently ignoring
    them would change behaviour the caller asked for, so they are rejected.
    """
    violations = [
        FieldViolation(path or "(request)", f"unknown field number {f.field_number}")
        for f in UnknownFieldSet(msg)
    ]
    for field, value in msg.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        child = f"{path}.{field.name}" if path else field.name
        if field.label == field.LABEL_REPEATED:
            if field.message_type.GetOptions().map_entry:
                continue
            for i, item in enumerate(value):
                violations += unknown_field_violations(item, f"{child}[{i}]")
        else:
            violations += unknown_field_violations(value, child)
    return violations
