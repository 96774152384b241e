"""Resource names and ids: ``apps/{app}/users/{user}/sessions/{session}``,
user parents (with the ``-`` wildcard), session ids and generated ids.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import re
import uuid

from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.limits import ALL, NOT_RESERVED, Limits, raise_if
from context_service.domain.memory import MemoryKey
from context_service.domain.model import (
    SessionKey,
)

_USER_PARENT = re.compile(r"apps/([^/]*)/users/([^/]*)")


def new_id() -> str:
    return uuid.uuid4().hex


def _parse_owned(name: str, collection: str, placeholder: str, limits: Limits, path: str) -> tuple[str, str, str]:
    """``apps/{app}/users/{user}/{collection}/{placeholder}`` as (app, user, id)."""
    m = re.fullmatch(rf"apps/([^/]*)/users/([^/]*)/{collection}/([^/]*)", name)
    if m is None:
        raise InvalidArgument.fields(
            [FieldViolation(path, f"must be apps/{{app}}/users/{{user}}/{collection}/{{{placeholder}}}")],
            reason=Reason.INVALID_NAME,
        )
    app, user, child = m.groups()
    violations = _owner_violations(app, user, limits, path)
    if not limits.valid_id(child):
        violations.append(FieldViolation(path, f"{placeholder.removesuffix('_id')} id must match {limits.id_pattern} {NOT_RESERVED}"))
    raise_if(violations, Reason.INVALID_NAME)
    return app, user, child


def parse_session_name(name: str, limits: Limits, path: str = "name") -> SessionKey:
    """``apps/{app}/users/{user}/sessions/{session}`` as a SessionKey."""
    return SessionKey(*_parse_owned(name, "sessions", "session", limits, path))


def parse_memory_name(name: str, limits: Limits, path: str = "name") -> MemoryKey:
    """``apps/{app}/users/{user}/memories/{memory_id}`` as a MemoryKey."""
    return MemoryKey(*_parse_owned(name, "memories", "memory_id", limits, path))


def parse_user_parent(parent: str, limits: Limits, path: str = "parent", *, wildcards: bool = False) -> tuple[str, str]:
    """``apps/{app}/users/{user}`` as (app, user). With ``wildcards`` either
    may be "-" (every app the caller may use, every user)."""
    m = _USER_PARENT.fullmatch(parent)
    if m is None:
        raise InvalidArgument.fields(
            [FieldViolation(path, "must be apps/{app}/users/{user}")], reason=Reason.INVALID_NAME
        )
    app, user = m.groups()
    violations = []
    if not (wildcards and app == ALL):
        violations += _owner_violations(app, "x", limits, path)
    if not (wildcards and user == ALL):
        violations += _owner_violations("x", user, limits, path)
    raise_if(violations, Reason.INVALID_NAME)
    return app, user


def _owner_violations(app: str, user: str, limits: Limits, path: str) -> list[FieldViolation]:
    v = []
    if not limits.valid_owner_id(app):
        v.append(FieldViolation(path, f"app id must match {limits.owner_id_pattern} {NOT_RESERVED}"))
    if not limits.valid_owner_id(user):
        v.append(FieldViolation(path, f"user id must match {limits.owner_id_pattern} {NOT_RESERVED}"))
    return v


def check_session_id(session_id: str, limits: Limits, path: str = "session_id") -> None:
    if not limits.valid_id(session_id):
        raise InvalidArgument.fields([FieldViolation(path, f"must match {limits.id_pattern} {NOT_RESERVED}")])

