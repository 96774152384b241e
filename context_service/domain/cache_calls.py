"""The cache service as the context service's turns and diagnostics see it:
scopes, leases, model replies and scope figures, in domain terms (the port
is ``context_service.ports.CachePort``; the gRPC client maps)."""

from __future__ import annotations

from dataclasses import dataclass

from context_service.domain.model import CacheInfo, Content, JsonObject, Usage


@dataclass(frozen=True, slots=True)
class CacheScope:
    """Whose caches: the app, the user, the model and the policy's scope
    labels (the cache service's default provider)."""

    app: str
    user: str
    model: str
    policy: JsonObject | None = None


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """A lease the model call acquires and releases itself: on everything
    but the request's last ``suffix`` contents; ``holder`` names the
    conversation (opaque to the cache service)."""

    suffix: int
    ttl_s: float | None = None
    holder: str = ""


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One model call's answer, or one streamed chunk of it. ``served``:
    the cache record of the call (None when the service sent none)."""

    content: Content
    usage: Usage | None = None
    served: CacheInfo | None = None
    finish_reason: str = ""
    model_version: str = ""


@dataclass(frozen=True, slots=True)
class ScopeStatus:
    scope_fingerprint: str
    entry_count: int
    inflight_count: int
    waiter_count: int


@dataclass(frozen=True, slots=True)
class ScopeInvalidation:
    scope_fingerprint: str
    entries_removed: int
    inflight_cancelled: int
