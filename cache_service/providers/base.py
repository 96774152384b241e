"""The provider interface and its typed errors.

A provider holds explicit prefix caches (create, update TTL, delete, list)
and runs model calls, optionally naming one of its caches. Adapters turn
their SDK's failures into the errors below, whose messages are fixed,
content-free strings: a provider's own error text can echo prompts or
resource names, so it is never carried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from cache_service.domain.model import JSON, ModelCall, ModelReply, ResourceName


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


class Provider(Protocol):
    name: str

    def min_cache_tokens(self, model: str) -> int:
        """The smallest prefix (estimated tokens) worth asking to cache."""
        ...

    async def create_cache(self, spec: CacheSpec) -> CacheHandle: ...

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle: ...

    async def delete_cache(self, name: ResourceName) -> None:
        """Raises CacheNotFound when the provider no longer holds it."""
        ...

    async def list_caches(self) -> list[ListedCache]: ...

    async def generate(self, call: ModelCall, cached: ResourceName | None) -> ModelReply:
        """``call`` is already rewritten: with ``cached`` it carries only the
        uncached suffix and no system instruction, tools or tool config."""
        ...

    def stream_generate(self, call: ModelCall, cached: ResourceName | None) -> AsyncIterator[ModelReply]: ...

    async def count_tokens(self, call: ModelCall) -> int: ...

    async def close(self) -> None: ...


class ProviderError(Exception):
    """Base of provider failures. ``status`` is the provider's HTTP status
    when there was one; ``retry_after`` its retry hint in seconds."""

    default_message = "provider call failed"

    def __init__(self, message: str | None = None, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message or self.default_message)
        self.status = status
        self.retry_after = retry_after


class RateLimited(ProviderError):
    default_message = "the provider rate-limited the call"


class CacheNotFound(ProviderError):
    """The provider no longer holds the named cache (404, or 403 naming it)."""

    default_message = "the provider no longer holds the cache"


class CacheTooSmall(ProviderError):
    default_message = "the provider refused a cache below its minimum size"

    def __init__(self, message: str | None = None, *, min_tokens: int | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.min_tokens = min_tokens


class ContextWindowExceeded(ProviderError):
    default_message = "the request exceeds the model's context window"

    def __init__(self, message: str | None = None, *, prompt_tokens: int | None = None,
                 context_window: int | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window


class ProviderUnavailable(ProviderError):
    default_message = "the provider is unavailable"


class ProviderTimeout(ProviderError):
    default_message = "the provider did not answer in time"


class InvalidRequest(ProviderError):
    default_message = "the provider rejected the request as invalid"


class ProviderPermissionDenied(ProviderError):
    default_message = "the provider denied permission"
