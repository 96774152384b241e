"""Context configuration as domain values: selection, compaction and cache
policies. ``None`` means "not set here": layers (server defaults, session
config, per-call override) are merged with ``overlay``.

Validation and defaults for each policy live with the logic that uses it
(``domain.selection``, ``domain.compaction_rules``); this module only holds the
shapes and their JSON form for storage.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class OverflowMode(str, enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    TRUNCATE = "TRUNCATE"
    ERROR = "ERROR"
    COMPRESS = "COMPRESS"


class ContentType(str, enum.Enum):
    TEXT = "TEXT"
    INLINE_DATA = "INLINE_DATA"
    FILE_DATA = "FILE_DATA"
    FUNCTION_CALL = "FUNCTION_CALL"
    FUNCTION_RESPONSE = "FUNCTION_RESPONSE"
    THOUGHT = "THOUGHT"


class CompactorKind(str, enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    EXTRACTIVE = "EXTRACTIVE"
    MODEL = "MODEL"
    REMOTE = "REMOTE"


@dataclass(frozen=True)
class EventFilter:
    authors: tuple[str, ...] = ()
    exclude_authors: tuple[str, ...] = ()
    invocation_ids: tuple[str, ...] = ()
    # An int: a number the client sent that names no type (validation refuses it).
    content_types: tuple[ContentType | int, ...] = ()
    start_time: dt.datetime | None = None
    end_time: dt.datetime | None = None
    include_partial: bool = False
    final_only: bool = False
    branch: str = ""


@dataclass(frozen=True)
class SelectionPolicy:
    max_bytes: int | None = None
    max_tokens: int | None = None
    max_request_bytes: int | None = None
    max_request_tokens: int | None = None
    bytes_per_token: float | None = None
    overflow: OverflowMode = OverflowMode.UNSPECIFIED
    filter: EventFilter | None = None
    extra_secret_keys: tuple[str, ...] = ()
    disable_calibration: bool = False
    max_attachment_bytes: int | None = None
    max_attachment_tokens: int | None = None


@dataclass(frozen=True)
class CompactionPolicy:
    enabled: bool | None = None
    compactor: CompactorKind = CompactorKind.UNSPECIFIED
    remote_target: str = ""
    context_window: int | None = None
    reserve_tokens: int | None = None
    keep_recent_tokens: int | None = None
    retain_recent_exchanges: int | None = None
    background_tokens: int | None = None
    event_threshold: int | None = None
    turn_interval: int | None = None
    overflow_keep_recent_tokens: int | None = None
    timeout_s: float | None = None
    max_input_bytes: int | None = None
    max_summary_bytes: int | None = None
    model: str = ""


@dataclass(frozen=True)
class CachePolicy:
    enabled: bool | None = None
    ttl_s: float | None = None
    scope_policy: dict[str, Any] | None = None


@dataclass(frozen=True)
class RetrievalPolicy:
    """A turn retrieves memory itself (``building.builder``): the newest
    user text searches the user's memory; at most ``limit`` matches scoring
    at least ``min_score`` fill the request's memory section."""

    enabled: bool | None = None
    limit: int | None = None
    min_score: float | None = None


@dataclass(frozen=True)
class ToolDeclaration:
    """The capabilities one tool's calls get through their tool tokens
    (besides ``identity``; see domain.tool_tokens)."""

    name: str
    capabilities: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContextConfig:
    model: str = ""
    selection: SelectionPolicy = field(default_factory=SelectionPolicy)
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    cache: CachePolicy = field(default_factory=CachePolicy)
    retrieval: RetrievalPolicy = field(default_factory=RetrievalPolicy)
    # Replaces the server's declarations as a whole when set.
    tools: tuple[ToolDeclaration, ...] = ()


def _is_unset(value: Any) -> bool:
    if value is None or value == "" or value == ():
        return True
    return isinstance(value, enum.Enum) and value.value == "UNSPECIFIED"


def overlay(base: T, top: T | None) -> T:
    """``base`` with every field that is set in ``top`` replaced.

    Nested policy dataclasses are overlaid field by field; booleans that are
    plain ``bool`` (not ``bool | None``) count as set only when True.
    """
    if top is None:
        return base
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(base):  # type: ignore[arg-type]
        new = getattr(top, f.name)
        if dataclasses.is_dataclass(new):
            changes[f.name] = overlay(getattr(base, f.name), new) if getattr(base, f.name) is not None else new
        elif new is False and f.type == "bool":
            continue
        elif not _is_unset(new):
            changes[f.name] = new
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]


# --- JSON form for storage -------------------------------------------------

def to_json(value: Any) -> Any:
    """JSON-safe form of a config dataclass; unset fields are left out."""
    if dataclasses.is_dataclass(value):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if _is_unset(item) or (item is False and f.type == "bool"):
                continue
            out[f.name] = to_json(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    return value


def _from_json(cls: type, data: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    hints = {f.name: f for f in dataclasses.fields(cls)}
    for name, raw in data.items():
        f = hints.get(name)
        if f is None:
            continue  # written by a newer version; ignore rather than fail reads
        kwargs[name] = _decode_field(cls, name, raw)
    return cls(**kwargs)


_NESTED = {
    (ContextConfig, "selection"): SelectionPolicy,
    (ContextConfig, "compaction"): CompactionPolicy,
    (ContextConfig, "cache"): CachePolicy,
    (ContextConfig, "retrieval"): RetrievalPolicy,
    (SelectionPolicy, "filter"): EventFilter,
}
_ENUMS = {
    (SelectionPolicy, "overflow"): OverflowMode,
    (CompactionPolicy, "compactor"): CompactorKind,
}


def _decode_field(cls: type, name: str, raw: Any) -> Any:
    if (cls, name) in _NESTED:
        return _from_json(_NESTED[(cls, name)], raw)
    if (cls, name) in _ENUMS:
        return _ENUMS[(cls, name)](raw)
    if cls is ContextConfig and name == "tools":
        return tuple(ToolDeclaration(str(t["name"]), tuple(t.get("capabilities", ()))) for t in raw)
    if cls is EventFilter and name == "content_types":
        return tuple(ContentType(v) for v in raw)
    if cls is EventFilter and name in ("start_time", "end_time"):
        return dt.datetime.fromisoformat(raw)
    if isinstance(raw, list):
        return tuple(raw)
    return raw


def config_from_json(data: dict[str, Any] | None) -> ContextConfig:
    config: ContextConfig = _from_json(ContextConfig, data or {})
    return config
