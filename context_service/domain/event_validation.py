"""Validation of a client's event (ids, labels, times, content, parts, usage,
metadata, JSON values and depth) and what the server fills before storing
it. Every rejected input is a FieldViolation naming the exact field, for
example ``event.content.parts[2].function_call.name``.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from typing import Any

from agentctx_common.errors import FieldViolation
from agentctx_common.reasons import Reason
from context_service.domain.json_depth import depth_violations
from context_service.domain.limits import NOT_RESERVED, Limits, raise_if
from context_service.domain.model import (
    Content,
    Event,
    EventKind,
    JsonObject,
    Part,
)
from context_service.domain.names import new_id

ROLES = ("user", "model")
# Labels (author, invocation id): printable, no control characters.
_LABEL = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_BRANCH = re.compile(r"[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*")
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
# Tool call ids come from providers and agents in many shapes; any printable
# ASCII without spaces is accepted.
_CALL_ID = re.compile(r"[!-~]{1,128}")
_MIME_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_BRANCH_CHARS = 512
MAX_URI_CHARS = 4096


def json_violations(value: Any, path: str) -> list[FieldViolation]:
    """NaN and infinities cannot be stored as JSON or fingerprinted."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [FieldViolation(path, "numbers must be finite")]
    if isinstance(value, dict):
        return [v for k, item in value.items() for v in json_violations(item, f"{path}.{k}")]
    if isinstance(value, list):
        return [v for i, item in enumerate(value) for v in json_violations(item, f"{path}[{i}]")]
    return []


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
        v += _part_violations(part, content.role, f"{path}.parts[{i}]", seen_calls)
        if part.function_call is not None:
            v += depth_violations(part.function_call.args, f"{path}.parts[{i}].function_call.args", limits.max_json_depth)
        elif part.function_response is not None:
            v += depth_violations(
                part.function_response.response, f"{path}.parts[{i}].function_response.response", limits.max_json_depth
            )
    return v


def _part_violations(part: Part, role: str, path: str, seen_calls: set[str]) -> list[FieldViolation]:
    payloads = [
        name
        for name in ("text", "inline_data", "file_data", "function_call", "function_response")
        if getattr(part, name) is not None
    ]
    if len(payloads) != 1:
        return [FieldViolation(path, "must set exactly one of text, inline_data, file_data, function_call, function_response")]
    v: list[FieldViolation] = []
    if part.text is not None:
        if not part.text and not part.thought_signature:
            v.append(FieldViolation(f"{path}.text", "must not be empty"))
    elif part.inline_data is not None:
        if not _MIME_TYPE.fullmatch(part.inline_data.mime_type):
            v.append(FieldViolation(f"{path}.inline_data.mime_type", "must be a media type such as image/png"))
        if not part.inline_data.data:
            v.append(FieldViolation(f"{path}.inline_data.data", "must not be empty"))
    elif part.file_data is not None:
        fd = part.file_data
        if not fd.file_uri or len(fd.file_uri) > MAX_URI_CHARS:
            v.append(FieldViolation(f"{path}.file_data.file_uri", f"is required, at most {MAX_URI_CHARS} characters"))
        if fd.mime_type and not _MIME_TYPE.fullmatch(fd.mime_type):
            v.append(FieldViolation(f"{path}.file_data.mime_type", "must be a media type such as application/pdf"))
    elif part.function_call is not None:
        fc = part.function_call
        p = f"{path}.function_call"
        if role != "model":
            v.append(FieldViolation(p, "is allowed in role 'model' content only"))
        if not _FUNCTION_NAME.fullmatch(fc.name):
            v.append(FieldViolation(f"{p}.name", "must be 1-128 characters of [A-Za-z0-9_.:-], starting with a letter or _"))
        if fc.id:
            if not _CALL_ID.fullmatch(fc.id):
                v.append(FieldViolation(f"{p}.id", "must be 1-128 printable ASCII characters without spaces"))
            elif fc.id in seen_calls:
                v.append(FieldViolation(f"{p}.id", "repeats another call's id in this event"))
            seen_calls.add(fc.id)
        v += json_violations(fc.args, f"{p}.args")
    else:
        fr = part.function_response
        assert fr is not None
        p = f"{path}.function_response"
        if role != "user":
            v.append(FieldViolation(p, "is allowed in role 'user' content only"))
        if not _FUNCTION_NAME.fullmatch(fr.name):
            v.append(FieldViolation(f"{p}.name", "must be 1-128 characters of [A-Za-z0-9_.:-], starting with a letter or _"))
        if not _CALL_ID.fullmatch(fr.id):
            v.append(FieldViolation(f"{p}.id", "is required: the id of the function call it answers"))
        v += json_violations(fr.response, f"{p}.response")
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

