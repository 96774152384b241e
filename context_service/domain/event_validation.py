"""Validation of a client's event (ids, labels, times, content, parts, usage,
metadata, JSON values and depth) and what the server fills before storing
it. Every rejected input is a FieldViolation naming the exact field, for
example ``event.content.parts[2].function_call.name``.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

from agentctx_common.errors import FieldViolation
from agentctx_common.reasons import Reason
from context_service.domain.json_depth import depth_violations, json_violations
from context_service.domain.limits import NOT_RESERVED, Limits, raise_if
from context_service.domain.model import (
    Content,
    Event,
    EventKind,
    JsonObject,
)
from context_service.domain.names import new_id
from context_service.domain.parts import json_payloads, part_violations

ROLES = ("user", "model")
# Labels (author, invocation id): printable, no control characters.
_LABEL = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_BRANCH = re.compile(r"[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_BRANCH_CHARS = 512


def state_violations(state: JsonObject, size_bytes: int, limits: Limits, path: str = "session.state") -> list[FieldViolation]:
    v = json_violations(state, path) + depth_violations(state, path, limits.max_json_depth)
    if size_bytes > limits.max_state_bytes:
        v.append(FieldViolation(path, f"is {size_bytes} bytes; the limit is {limits.max_state_bytes}"))
    return v


def event_violations(
    event: Event, limits: Limits, *, size_bytes: int, now: dt.datetime, path: str = "event"
) -> list[FieldViolation]:
    """Everything wrong with a client's event; empty when it may be stored.

    ``size_bytes`` is the event's encoded size on the wire.
    """
    v: list[FieldViolation] = []
    if event.kind is not EventKind.MESSAGE or event.compaction is not None:
        v.append(FieldViolation(f"{path}.kind", "clients can append MESSAGE events only"))
    if size_bytes > limits.max_event_bytes:
        v.append(FieldViolation(path, f"is {size_bytes} bytes; the limit is {limits.max_event_bytes}"))
    if event.id and not limits.valid_id(event.id):
        v.append(FieldViolation(f"{path}.id", f"must match {limits.id_pattern} {NOT_RESERVED}"))
    if not event.author:
        v.append(FieldViolation(f"{path}.author", "is required"))
    elif not _LABEL.fullmatch(event.author):
        v.append(FieldViolation(f"{path}.author", "must be 1-128 characters without control characters"))
    if event.invocation_id and not _LABEL.fullmatch(event.invocation_id):
        v.append(FieldViolation(f"{path}.invocation_id", "must be 1-128 characters without control characters"))
    if event.branch and (len(event.branch) > MAX_BRANCH_CHARS or not _BRANCH.fullmatch(event.branch)):
        v.append(FieldViolation(f"{path}.branch", "must be dot-separated names of [A-Za-z0-9_:-], at most 512 characters"))
    if event.create_time is not None:
        if event.create_time < _EPOCH:
            v.append(FieldViolation(f"{path}.create_time", "must not be before 1970"))
        elif event.create_time > now + dt.timedelta(seconds=limits.max_clock_skew_s):
            v.append(FieldViolation(f"{path}.create_time", "must not be in the future"))
    # No content: an action-only event (state change, transfer, end-of-turn
    # marker), stored and listed but never sent to a model.
    if event.content is not None:
        v += content_violations(event.content, limits, f"{path}.content")
    if event.usage is not None:
        for name in ("prompt_tokens", "cached_prompt_tokens", "output_tokens", "thoughts_tokens", "total_tokens",
                     "cache_write_tokens"):
            if getattr(event.usage, name) < 0:
                v.append(FieldViolation(f"{path}.usage.{name}", "must not be negative"))
    if event.custom_metadata:
        v += json_violations(event.custom_metadata, f"{path}.custom_metadata")
        v += depth_violations(event.custom_metadata, f"{path}.custom_metadata", limits.max_json_depth)
    if event.retracts_event_id:
        v += _retraction_violations(event, limits, path)
    call_ids = {c.id for c in event.content.function_calls} if event.content is not None else set()
    for i, tool_id in enumerate(event.long_running_tool_ids):
        if tool_id not in call_ids:
            v.append(FieldViolation(f"{path}.long_running_tool_ids[{i}]", "must name a function call id of this event"))
    return v


def _retraction_violations(event: Event, limits: Limits, path: str) -> list[FieldViolation]:
    """A retraction names another event by a valid id and carries nothing a
    model could read. Whether its target is stored, retractable and not
    retracted yet is the append's check (``storage.append_plan``)."""
    v: list[FieldViolation] = []
    target = event.retracts_event_id
    if not limits.valid_id(target):
        v.append(FieldViolation(f"{path}.retracts_event_id", f"must match {limits.id_pattern} {NOT_RESERVED}"))
    elif target == event.id:
        v.append(FieldViolation(f"{path}.retracts_event_id", "must name another event"))
    if event.content is not None:
        v.append(FieldViolation(f"{path}.content", "must be empty on a retraction"))
    if event.partial:
        v.append(FieldViolation(f"{path}.partial", "must be false on a retraction"))
    return v


def content_violations(content: Content, limits: Limits, path: str) -> list[FieldViolation]:
    v: list[FieldViolation] = []
    if content.role not in ROLES:
        v.append(FieldViolation(f"{path}.role", "must be 'user' or 'model'"))
    if not content.parts:
        v.append(FieldViolation(f"{path}.parts", "needs at least one part"))
    elif len(content.parts) > limits.max_parts_per_event:
        v.append(FieldViolation(f"{path}.parts", f"has {len(content.parts)} parts; the limit is {limits.max_parts_per_event}"))
    seen_calls: set[str] = set()
    for i, part in enumerate(content.parts):
        v += part_violations(part, content.role, f"{path}.parts[{i}]", seen_calls)
        for kind, name, value in json_payloads(part):
            v += depth_violations(value, f"{path}.parts[{i}].{kind.name}.{name}", limits.max_json_depth)
    return v


def check_event(event: Event, limits: Limits, *, size_bytes: int, now: dt.datetime, path: str = "event") -> None:
    raise_if(event_violations(event, limits, size_bytes=size_bytes, now=now, path=path), Reason.INVALID_EVENT)


def prepare_event(event: Event) -> Event:
    """Fills what the server assigns before storing: a generated event id
    when the client sent none, and ids for function calls without one.

    Call ids are derived from the event id and the part's position, so a
    retry of the same event gets the same ids.
    """
    event_id = event.id or new_id()
    content = event.content
    if content is not None and any(p.function_call is not None and not p.function_call.id for p in content.parts):
        parts = tuple(
            dataclasses.replace(p, function_call=dataclasses.replace(p.function_call, id=f"{event_id}.call{i}"))
            if p.function_call is not None and not p.function_call.id
            else p
            for i, p in enumerate(content.parts)
        )
        content = Content(content.role, parts)
    if event_id == event.id and content is event.content:
        return event
    return dataclasses.replace(event, id=event_id, content=content)

