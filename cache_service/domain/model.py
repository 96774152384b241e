"""Domain values of the cache service.

Content is carried in the canonical JSON shape of agentctx_common.canonical
(Gemini-REST-like camelCase dicts), so fingerprints computed here equal the
context service's. Values are treated as immutable: code that needs a
different request builds a new one and never edits a caller's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


class ResourceName:
    """A provider resource name (``cachedContents/...``). Secret: it must
    never leave the process, so every printable form hides it. Only provider
    adapters and the journal call ``reveal()``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "ResourceName(<hidden>)"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourceName) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:
        raise TypeError("a ResourceName cannot be pickled or copied out of the process")


class CacheState(enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    CREATED = "CREATED"
    HIT = "HIT"
    GROWN = "GROWN"
    BYPASS = "BYPASS"


class BypassReason(enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    DISABLED = "DISABLED"
    FIRST_SIGHTING = "FIRST_SIGHTING"
    BELOW_MIN_TOKENS = "BELOW_MIN_TOKENS"
    EMPTY_PREFIX = "EMPTY_PREFIX"
    CREATE_FAILED = "CREATE_FAILED"
    RATE_LIMITED = "RATE_LIMITED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    CAPACITY = "CAPACITY"
    CACHE_MISSING = "CACHE_MISSING"
    INVALIDATED = "INVALIDATED"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"


@dataclass(frozen=True)
class CacheInfo:
    """Public, content-free record of what happened to a call's cache."""

    state: CacheState = CacheState.UNSPECIFIED
    bypass_reason: BypassReason = BypassReason.UNSPECIFIED
    prefix_fingerprint: str = ""
    prefix_tokens: int = 0
    expire_time: float | None = None  # wall clock seconds
    scope_fingerprint: str = ""
    uses: int = 0


@dataclass(frozen=True)
class ModelCall:
    """One provider-neutral model request."""

    model: str
    contents: tuple[JSON, ...]
    system_instruction: JSON | None = None
    tools: tuple[JSON, ...] = ()
    tool_config: JSON | None = None
    generation_config: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    output_tokens: int = 0
    thoughts_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class ModelReply:
    """A model answer, or one streamed chunk of it (usage and finish reason
    only on the last)."""

    content: JSON | None = None
    finish_reason: str = ""  # STOP, MAX_TOKENS, SAFETY, RECITATION, MALFORMED_FUNCTION_CALL, OTHER
    usage: Usage | None = None
    model_version: str = ""
