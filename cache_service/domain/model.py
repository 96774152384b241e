"""Domain values of the cache service.

Content is carried in the canonical JSON shape of agentctx_common.canonical
(Gemini-REST-like camelCase dicts), so fingerprints computed here equal the
context service's. Values are treated as immutable: code that needs a
different request builds a new one and never edits a caller's.

The values that cross a port (cache specs and handles, lease claims) live
here too, so domain.ports depends only on values and never on an
implementation (see docs/ARCHITECTURE.md, "Ports").
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
    REGISTRY_UNAVAILABLE = "REGISTRY_UNAVAILABLE"


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
    # Tokens written into a provider cache for this call: of prompt_tokens,
    # where the call writes (Anthropic's cache_creation_input_tokens, OpenAI's
    # cache_write_tokens); a named cache's whole size on the call whose lease
    # created it (Gemini bills the create, beside the call, at the input price).
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class ModelReply:
    """A model answer, or one streamed chunk of it (usage and finish reason
    only on the last)."""

    content: JSON | None = None
    finish_reason: str = ""  # STOP, MAX_TOKENS, SAFETY, RECITATION, MALFORMED_FUNCTION_CALL, OTHER
    usage: Usage | None = None
    model_version: str = ""


@dataclass(frozen=True)
class CacheSpec:
    """What to cache: the prefix of a request, for ``ttl_s`` seconds."""

    model: str
    system_instruction: JSON | None
    tools: tuple[JSON, ...]
    tool_config: JSON | None
    contents: tuple[JSON, ...]
    ttl_s: float
    display_name: str


@dataclass(frozen=True)
class CacheHandle:
    """A created cache. ``name`` is secret (see ResourceName)."""

    name: ResourceName
    expire_time: float  # wall clock seconds
    tokens: int | None = None  # as the provider counted them


@dataclass(frozen=True)
class ListedCache:
    name: ResourceName
    display_name: str
    expire_time: float


@dataclass(frozen=True)
class LeaseClaims:
    """What a lease token says. ``boot`` is the id of the key that signed it
    (one per process today; see domain.leases)."""

    boot: str
    entry_id: str
    generation: int
    scope_fingerprint: str
    lease_id: str
    expires_at: float  # wall clock seconds
    state: str  # CREATED, HIT or GROWN


@dataclass(frozen=True)
class AcquireResult:
    """A lease (empty on bypass) and the public metadata; ``entry_id``
    names the leased entry and ``claims`` are what the lease says
    (registry-internal, never sent: a call's own lease is used and
    released by its claims, its token never verified)."""

    lease: str
    info: CacheInfo
    entry_id: str = ""
    claims: LeaseClaims | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ScopeStatus:
    scope_fingerprint: str
    entry_count: int
    inflight_count: int
    waiter_count: int
    prefix_bytes: int
