"""What a failed create means, and how a cache failure reaches the caller
(see docs/ARCHITECTURE.md, "Cache service").

- ``classify_create_failure``: a provider's create failure -> bypass reason,
  retry hint, whether the provider surely created nothing (then the journal
  intent can go), and the minimum size it taught us, if any.
- ``failure``: with ``failure_mode = "bypass"`` a cache failure is a BYPASS
  result; with "error" it is the AgentCtxError of its reason. Policy
  bypasses (``bypass``) are never errors.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agentctx_common.errors import (
    Aborted,
    AgentCtxError,
    DeadlineExceeded,
    ResourceExhausted,
    Unavailable,
)
from agentctx_common.reasons import Reason
from cache_service.domain.model import AcquireResult, BypassReason, CacheInfo, CacheState
from cache_service.domain.ports import (
    CacheTooSmall,
    ContextWindowExceeded,
    InvalidRequest,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RegistryUnavailable,
)

log = logging.getLogger("agentctx.cache.registry")

# Failures that mean "no cache this time", as opposed to policy decisions.
_FAILURE_ERRORS: dict[BypassReason, tuple[type[AgentCtxError], Reason]] = {
    BypassReason.CREATE_FAILED: (Unavailable, Reason.CACHE_CREATE_FAILED),
    BypassReason.RATE_LIMITED: (ResourceExhausted, Reason.RATE_LIMITED),
    BypassReason.DEADLINE_EXCEEDED: (DeadlineExceeded, Reason.CACHE_DEADLINE_EXCEEDED),
    BypassReason.CAPACITY: (ResourceExhausted, Reason.CACHE_CAPACITY),
    BypassReason.INVALIDATED: (Aborted, Reason.CACHE_INVALIDATED),
    BypassReason.UNAVAILABLE: (Unavailable, Reason.PROVIDER_UNAVAILABLE),
}

Outcome = AcquireResult | AgentCtxError


@dataclass(frozen=True)
class CreateFailure:
    reason: BypassReason
    retry_after: float | None
    definite: bool  # the provider surely created nothing
    learned_floor: int | None = None  # the minimum size a CacheTooSmall taught


def classify_create_failure(exc: BaseException, prefix_tokens: int) -> CreateFailure:
    if isinstance(exc, CacheTooSmall):
        return CreateFailure(BypassReason.BELOW_MIN_TOKENS, None, True, exc.min_tokens or prefix_tokens + 1)
    if isinstance(exc, RateLimited):
        return CreateFailure(BypassReason.RATE_LIMITED, exc.retry_after, True)
    if isinstance(exc, (InvalidRequest, ProviderPermissionDenied, ContextWindowExceeded)):
        return CreateFailure(BypassReason.CREATE_FAILED, None, True)
    if isinstance(exc, ProviderUnavailable):
        return CreateFailure(BypassReason.UNAVAILABLE, exc.retry_after, False)
    if isinstance(exc, (TimeoutError, ProviderTimeout)):
        return CreateFailure(BypassReason.DEADLINE_EXCEEDED, None, False)
    if not isinstance(exc, (ProviderError, asyncio.CancelledError)):
        log.error("unexpected create failure", extra={"error_type": type(exc).__name__})
    return CreateFailure(BypassReason.CREATE_FAILED, None, False)


def bypass(base: CacheInfo, reason: BypassReason) -> AcquireResult:
    return AcquireResult("", CacheInfo(state=CacheState.BYPASS, bypass_reason=reason,
                                       prefix_fingerprint=base.prefix_fingerprint, prefix_tokens=base.prefix_tokens,
                                       scope_fingerprint=base.scope_fingerprint))


def failure(failure_mode: str, reason: BypassReason, base: CacheInfo, retry_after: float | None = None) -> Outcome:
    if failure_mode != "error":
        return bypass(base, reason)
    if reason is BypassReason.REGISTRY_UNAVAILABLE:
        return RegistryUnavailable("connection", retry_after if retry_after is not None else 1.0)
    cls, error_reason = _FAILURE_ERRORS[reason]
    hint = retry_after if retry_after is not None else (1.0 if cls in (Unavailable, ResourceExhausted) else None)
    return cls(f"prefix cache unavailable: {reason.value.lower().replace('_', ' ')}", reason=error_reason,
               metadata={"prefix_tokens": base.prefix_tokens}, retry_after=hint)
