"""The context service's domain types: content, events and compaction.

Plain frozen dataclasses, independent of protobuf and storage. A Part and
its payloads live in ``parts.py`` (with the Part kinds) and are re-exported
here. JSON maps
(tool args and responses, state, metadata) are plain ``dict`` values that
callers must not mutate.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from context_service.domain.parts import Blob as Blob
from context_service.domain.parts import FileData as FileData
from context_service.domain.parts import FunctionCall as FunctionCall
from context_service.domain.parts import FunctionResponse as FunctionResponse
from context_service.domain.parts import JsonObject as JsonObject
from context_service.domain.parts import Part as Part


class _Derived:
    """The slot a Content keeps what is computed from it once in: its
    canonical JSON and that JSON's SHA-256 (``domain.selection.canonical``
    fills it on first use; a content read from storage starts with the
    stored JSON and an empty digest). Not a dataclass field: outside
    equality, hashing, repr and pickles (a copy computes it again); unset
    until used."""

    __slots__ = ("_canonical",)
    _canonical: tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class Content(_Derived):
    role: str
    parts: tuple[Part, ...] = ()

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return tuple(p.function_call for p in self.parts if p.function_call is not None)

    @property
    def function_responses(self) -> tuple[FunctionResponse, ...]:
        return tuple(p.function_response for p in self.parts if p.function_response is not None)


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    output_tokens: int = 0
    thoughts_tokens: int = 0
    total_tokens: int = 0
    cache_write_tokens: int = 0  # of prompt_tokens, written into a provider cache


class CacheState(str, enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    CREATED = "CREATED"
    HIT = "HIT"
    GROWN = "GROWN"
    BYPASS = "BYPASS"


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """Public cache record of a model call. Never holds a resource name."""

    state: CacheState = CacheState.UNSPECIFIED
    bypass_reason: str = "UNSPECIFIED"
    prefix_fingerprint: str = ""
    prefix_tokens: int = 0
    expire_time: dt.datetime | None = None
    scope_fingerprint: str = ""
    uses: int = 0


class EventKind(str, enum.Enum):
    MESSAGE = "MESSAGE"
    COMPACTION = "COMPACTION"


class CompactionTrigger(str, enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    MANUAL = "MANUAL"
    THRESHOLD = "THRESHOLD"
    BACKGROUND = "BACKGROUND"
    OVERFLOW = "OVERFLOW"
    EVENT_COUNT = "EVENT_COUNT"
    TURN_INTERVAL = "TURN_INTERVAL"
    COMPRESS = "COMPRESS"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Versioned, JSON-safe record of one compaction: ids, fingerprints and
    counts, never content."""

    schema_version: int
    checkpoint_id: str
    trigger: CompactionTrigger
    source_event_count: int
    source_first_event_id: str
    source_last_event_id: str
    source_first_time: dt.datetime | None
    source_last_time: dt.datetime | None
    source_fingerprint: str
    retained_event_count: int
    summary_bytes: int
    retained_user_turns: int
    compactor: str
    retained_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Compaction:
    start_sequence: int
    end_sequence: int
    first_kept_event_id: str
    first_kept_sequence: int
    summary: str
    checkpoint: Checkpoint
    summarizer_usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One history entry. ``sequence`` is 0 until the event is stored."""

    id: str
    author: str
    content: Content | None = None
    sequence: int = 0
    invocation_id: str = ""
    branch: str = ""
    partial: bool = False
    turn_complete: bool = False
    create_time: dt.datetime | None = None
    usage: Usage | None = None
    cache: CacheInfo | None = None
    custom_metadata: JsonObject | None = None
    kind: EventKind = EventKind.MESSAGE
    compaction: Compaction | None = None
    long_running_tool_ids: tuple[str, ...] = ()
    finish_reason: str = ""  # why the model stopped (a model reply): STOP, MAX_TOKENS, ... ("" unset)
    model_version: str = ""  # the exact model version that answered, when reported
    # A retraction: the id of the earlier event of the session it takes back
    # ("" on every other event). Built contexts and compaction leave both out.
    retracts_event_id: str = ""
    # Why the call that produced the event failed or was stopped (stored, never sent to a model).
    error_code: str = ""
    error_message: str = ""

    @property
    def is_compaction(self) -> bool:
        return self.kind is EventKind.COMPACTION


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Identifies a session: apps/{app}/users/{user}/sessions/{session}."""

    app: str
    user: str
    session: str

    @property
    def name(self) -> str:
        return f"apps/{self.app}/users/{self.user}/sessions/{self.session}"

    def event_name(self, event_id: str) -> str:
        return f"{self.name}/events/{event_id}"
