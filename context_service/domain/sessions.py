"""Sessions and events as domain rules: resource names, ids, limits, event
and state validation, page tokens and the stored session record.

Pure Python: no grpc, no protobuf, no storage. Every rejected input becomes
an InvalidArgument whose FieldViolations name the exact field, for example
``event.content.parts[2].function_call.name``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import hashlib
import json
import math
import re
import typing
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.config import ContextConfig, config_from_json
from context_service.domain.json_depth import DEFAULT_MAX_JSON_DEPTH, depth_violations
from context_service.domain.model import (
    Content,
    Event,
    EventKind,
    JsonObject,
    Part,
    SessionKey,
)
from context_service.domain.validation import config_violations

ROLES = ("user", "model")
# "apps/{app}/users/-" lists every user; "apps/-/..." every app the caller may use.
ALL = "-"
# Never ids, whatever the patterns allow: "-" is the list wildcard and "."
# and ".." read as path steps, so a name holding one is ambiguous.
RESERVED_IDS = frozenset({ALL, ".", ".."})
_NOT_RESERVED = "and not be '-', '.' or '..'"

_SESSION_NAME = re.compile(r"apps/([^/]*)/users/([^/]*)/sessions/([^/]*)")
_USER_PARENT = re.compile(r"apps/([^/]*)/users/([^/]*)")
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


@dataclass(frozen=True)
class Limits:
    """Input limits, from settings. Violations are INVALID_ARGUMENT."""

    max_event_bytes: int = 8 * 1024 * 1024
    max_parts_per_event: int = 256
    max_state_bytes: int = 1024 * 1024
    # Nesting of JSON values (args, results, metadata, state); see json_depth.
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    # Session and event ids (the proto documents 1-128 of [A-Za-z0-9._:-]).
    id_pattern: str = r"[A-Za-z0-9._:-]{1,128}"
    # App and user ids; "@" and "+" allow e-mail-like user ids.
    owner_id_pattern: str = r"[A-Za-z0-9._:@+-]{1,128}"
    default_session_page_size: int = 50
    default_event_page_size: int = 100
    max_page_size: int = 1000
    # How far in the future a client-set event time may be.
    max_clock_skew_s: float = 86400.0
    _id_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _owner_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_id_re", re.compile(self.id_pattern))
        object.__setattr__(self, "_owner_re", re.compile(self.owner_id_pattern))

    def valid_id(self, value: str) -> bool:
        return value not in RESERVED_IDS and self._id_re.fullmatch(value) is not None

    def valid_owner_id(self, value: str) -> bool:
        return value not in RESERVED_IDS and self._owner_re.fullmatch(value) is not None


@dataclass(frozen=True)
class SessionRecord:
    """A stored session. ``config`` is what the client set (unset fields take
    the server defaults at use time); ``etag`` changes on every write."""

    key: SessionKey
    state: JsonObject
    config: ContextConfig
    etag: str
    create_time: dt.datetime
    update_time: dt.datetime
    event_count: int
    last_sequence: int
    # The state every session of the app shares, and of the user in the app.
    app_state: JsonObject = field(default_factory=dict)
    user_state: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionHead:
    """What selection needs of a session row. ``incarnation`` changes when a
    session is deleted and created again under the same name."""

    key: SessionKey
    incarnation: str
    last_sequence: int
    config: ContextConfig


def head_of(record: SessionRecord) -> SessionHead:
    # The etag is "{incarnation}.{version}" (storage.codec.etag).
    return SessionHead(record.key, record.etag.rpartition(".")[0], record.last_sequence, record.config)


@dataclass(frozen=True)
class AppendResult:
    """The stored event (sequence and create_time set), the session's etag
    after the append, whether the event id was already stored, and the
    session's update time after the append (None for a deduplicated one)."""

    event: Event
    session_etag: str
    deduplicated: bool = False
    session_update_time: dt.datetime | None = None


@dataclass(frozen=True)
class StateDelta:
    """Keys merged into the session's, the user's and the app's state with
    an event, in its transaction."""

    session: JsonObject = field(default_factory=dict)
    user: JsonObject = field(default_factory=dict)
    app: JsonObject = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.session or self.user or self.app)


def session_update_time(now: dt.datetime, event_time: dt.datetime | None) -> dt.datetime:
    """A session's update time after an append: the commit time, or the
    event's own time when the client set it later (so a session reads as
    updated no earlier than its newest event, as ADK expects)."""
    return max(now, event_time) if event_time is not None else now


# ListSessions orders.
ORDER_CREATE = "create_time"
ORDER_UPDATE = "update_time"


def parse_session_order(order_by: str, path: str = "order_by") -> str:
    order = order_by.strip() or ORDER_CREATE
    if order not in (ORDER_CREATE, ORDER_UPDATE):
        raise InvalidArgument.fields([FieldViolation(path, "must be '', 'create_time' or 'update_time'")])
    return order


@dataclass(frozen=True)
class SessionQuery:
    """Which sessions to list: ``apps`` None means every app, ``user`` None
    every user."""

    apps: frozenset[str] | None
    user: str | None
    order: str = "create_time"

    @property
    def scope(self) -> str:
        apps = ",".join(sorted(self.apps)) if self.apps is not None else "*"
        suffix = "" if self.order == ORDER_CREATE else f"|{self.order}"
        return f"{apps}/{self.user or ALL}{suffix}"


@dataclass(frozen=True)
class SessionPage:
    sessions: list[SessionRecord]
    next_page_token: str


# --- errors -----------------------------------------------------------------


def raise_if(violations: list[FieldViolation], reason: Reason = Reason.INVALID_ARGUMENT) -> None:
    if violations:
        raise InvalidArgument.fields(violations, reason=reason)


# --- names and ids ------------------------------------------------------------


def new_id() -> str:
    return uuid.uuid4().hex


def parse_session_name(name: str, limits: Limits, path: str = "name") -> SessionKey:
    """``apps/{app}/users/{user}/sessions/{session}`` as a SessionKey."""
    m = _SESSION_NAME.fullmatch(name)
    if m is None:
        raise InvalidArgument.fields(
            [FieldViolation(path, "must be apps/{app}/users/{user}/sessions/{session}")], reason=Reason.INVALID_NAME
        )
    app, user, session = m.groups()
    violations = _owner_violations(app, user, limits, path)
    if not limits.valid_id(session):
        violations.append(FieldViolation(path, f"session id must match {limits.id_pattern} {_NOT_RESERVED}"))
    raise_if(violations, Reason.INVALID_NAME)
    return SessionKey(app, user, session)


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
        v.append(FieldViolation(path, f"app id must match {limits.owner_id_pattern} {_NOT_RESERVED}"))
    if not limits.valid_owner_id(user):
        v.append(FieldViolation(path, f"user id must match {limits.owner_id_pattern} {_NOT_RESERVED}"))
    return v


def check_session_id(session_id: str, limits: Limits, path: str = "session_id") -> None:
    if not limits.valid_id(session_id):
        raise InvalidArgument.fields([FieldViolation(path, f"must match {limits.id_pattern} {_NOT_RESERVED}")])


# --- JSON values ----------------------------------------------------------------


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


# --- events -------------------------------------------------------------------------


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
        v.append(FieldViolation(f"{path}.id", f"must match {limits.id_pattern} {_NOT_RESERVED}"))
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
    call_ids = {c.id for c in event.content.function_calls} if event.content is not None else set()
    for i, tool_id in enumerate(event.long_running_tool_ids):
        if tool_id not in call_ids:
            v.append(FieldViolation(f"{path}.long_running_tool_ids[{i}]", "must name a function call id of this event"))
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


# --- paging ---------------------------------------------------------------------------


def page_size(requested: int, default: int, limits: Limits, path: str = "page_size") -> int:
    if requested < 0:
        raise InvalidArgument.fields([FieldViolation(path, "must not be negative")])
    if requested > limits.max_page_size:
        raise InvalidArgument.fields([FieldViolation(path, f"must be at most {limits.max_page_size}")])
    return requested or default


def encode_page_token(scope: str, after: int) -> str:
    """An opaque token: the position to resume after, bound to the query."""
    payload = {"s": _scope_tag(scope), "a": after}
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_page_token(token: str, scope: str, path: str = "page_token") -> int:
    """The position a token resumes after (0 for an empty token)."""
    if not token:
        return 0
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after = payload["a"]
        tag = payload["s"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InvalidArgument.fields([FieldViolation(path, "is not a token this server issued")], reason=Reason.INVALID_PAGE_TOKEN) from None
    if tag != _scope_tag(scope) or not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise InvalidArgument.fields(
            [FieldViolation(path, "does not belong to this request; other fields must not change between pages")],
            reason=Reason.INVALID_PAGE_TOKEN,
        )
    return after


def encode_session_cursor(scope: str, update_time: dt.datetime, pk: int) -> str:
    """A token resuming a listing ordered by update time after (time, pk)."""
    stamp = update_time.astimezone(dt.UTC).isoformat()
    payload = {"s": _scope_tag(scope), "t": stamp, "a": pk}
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_session_cursor(token: str, scope: str, path: str = "page_token") -> tuple[dt.datetime, int] | None:
    if not token:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        tag, after, stamp = payload["s"], payload["a"], dt.datetime.fromisoformat(payload["t"])
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InvalidArgument.fields([FieldViolation(path, "is not a token this server issued")],
                                     reason=Reason.INVALID_PAGE_TOKEN) from None
    if tag != _scope_tag(scope) or not isinstance(after, int) or isinstance(after, bool) or stamp.tzinfo is None:
        raise InvalidArgument.fields(
            [FieldViolation(path, "does not belong to this request; other fields must not change between pages")],
            reason=Reason.INVALID_PAGE_TOKEN,
        )
    return stamp, after


def _scope_tag(scope: str) -> str:
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


# --- update masks ------------------------------------------------------------------


# Paths UpdateSession accepts, and the ContextConfig fields each replaces.
CONFIG_PATHS = {
    "config": ("model", "selection", "compaction", "cache"),
    "config.model": ("model",),
    "config.selection": ("selection",),
    "config.compaction": ("compaction",),
    "config.cache": ("cache",),
}


@dataclass(frozen=True)
class SessionChange:
    """What an UpdateSession changes: the whole state and/or some top-level
    fields of the config."""

    state: bool = False
    config_fields: tuple[str, ...] = ()


def parse_update_mask(paths: Iterable[str], path: str = "update_mask.paths") -> SessionChange:
    paths = list(paths)
    if not paths:
        raise InvalidArgument.fields([FieldViolation("update_mask", "is required: name state and/or config")])
    state = False
    fields: list[str] = []
    violations = []
    for i, p in enumerate(paths):
        if p == "*":
            state = True
            fields += CONFIG_PATHS["config"]
        elif p == "state":
            state = True
        elif p in CONFIG_PATHS:
            fields += CONFIG_PATHS[p]
        else:
            violations.append(FieldViolation(f"{path}[{i}]", f"unknown path {p!r}; use state, config or config.<policy>"))
    raise_if(violations)
    return SessionChange(state, tuple(dict.fromkeys(fields)))


def apply_config_fields(current: ContextConfig, new: ContextConfig, fields: Iterable[str]) -> ContextConfig:
    return dataclasses.replace(current, **{name: getattr(new, name) for name in fields})


def only_config_fields(config: ContextConfig, fields: Iterable[str]) -> ContextConfig:
    """``config`` with every field not named left at its default (for
    validating just what an update changes)."""
    return apply_config_fields(ContextConfig(), config, fields)



# --- server defaults ---------------------------------------------------------------


def _unknown_keys(data: dict[str, Any], cls: type, path: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    unknown = []
    for name, value in data.items():
        if name not in hints:
            unknown.append(f"{path}{name}")
            continue
        hint = hints[name]
        nested = [a for a in (hint, *typing.get_args(hint)) if isinstance(a, type) and dataclasses.is_dataclass(a)]
        if nested and isinstance(value, dict):
            unknown += _unknown_keys(value, nested[0], f"{path}{name}.")
    return unknown


def config_from_defaults(data: dict[str, Any]) -> ContextConfig:
    """The server-wide defaults from settings (the JSON form of
    ContextConfig). Unknown keys and invalid values raise ValueError."""
    unknown = _unknown_keys(data, ContextConfig, "")
    if unknown:
        raise ValueError(f"unknown keys: {', '.join(unknown)}")
    try:
        config = config_from_json(data)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"invalid value: {exc}") from None
    violations = config_violations(config, "session_defaults")
    if violations:
        raise ValueError("; ".join(f"{v.field}: {v.description}" for v in violations))
    return config
