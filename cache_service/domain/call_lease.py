"""GenerateContent with ``acquire``: a lease on the call's own prefix, for
that call only (see docs/ARCHITECTURE.md, "Cache service").

It does what AcquireLease, GenerateContent with the lease and ReleaseLease
do, in one round trip instead of three. The prefix is the call's own head
plus its contents before the suffix. Those contents are converted and
measured once for the call, and the caller never sends them twice. The
lease is issued, checked (scope, generation, expiry, prefix) and released
here, and never leaves the service: it is used by its claims and the
chain digests its acquire computed (``generation.HeldLease``), so its
token is never verified and its prefix never hashed a second time.

The record is what a caller would have made of the three answers:

- the call's record, when the lease served it;
- the acquire's bypass, when none was issued;
- a BYPASS with the call sent uncached, when the lease was refused
  between acquire and call (an invalidation in between): INVALIDATED, or
  CACHE_MISSING for any other invalid reason; REGISTRY_UNAVAILABLE when the
  shared registry stopped answering in between (with failure_mode "error",
  that error). A release the registry cannot take is left to the lease's
  expiry.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from agentctx_common.errors import FailedPrecondition
from agentctx_common.reasons import Reason
from cache_service.domain.generation import Generator, HeldLease
from cache_service.domain.keys import Prefix, PrefixView, Scope, canonical_list, estimate_tokens
from cache_service.domain.model import AcquireResult, BypassReason, CacheInfo, CacheState, ModelCall, ModelReply
from cache_service.domain.ports import RegistryUnavailable
from cache_service.domain.registry import Registry


@dataclass(frozen=True)
class CallLease:
    """The lease a call acquires for itself: its last ``suffix`` contents
    are the uncached input (1 to all of them)."""

    suffix: int
    ttl_s: float | None = None
    holder: str = ""


class CallLeases:
    def __init__(self, registry: Registry, generator: Generator, bytes_per_token: float) -> None:
        self._registry = registry
        self._generator = generator
        self._bytes_per_token = bytes_per_token

    async def generate(self, scope: Scope, call: ModelCall, spec: CallLease,
                       timeout_s: float | None) -> tuple[ModelReply, CacheInfo]:
        started = self._registry.clock.monotonic()
        acquired, held = await self._acquire(scope, call, spec, timeout_s)
        if held is None:
            reply, _ = await self._generator.generate(scope, call, "", self._left(timeout_s, started))
            return reply, acquired.info
        try:
            try:
                return await self._generator.generate(scope, call, held, self._left(timeout_s, started))
            except FailedPrecondition as err:
                if err.reason is not Reason.LEASE_INVALID:
                    raise
                record = _refused(acquired.info, err)
            except RegistryUnavailable:
                if self._registry.settings.failure_mode == "error":
                    raise
                record = _unregistered(acquired.info)
            reply, _ = await self._generator.generate(scope, call, "", self._left(timeout_s, started))
            return reply, record
        finally:
            await self._release(held)

    async def stream(self, scope: Scope, call: ModelCall, spec: CallLease,
                     timeout_s: float | None) -> AsyncIterator[tuple[ModelReply, CacheInfo | None]]:
        """As ``Generator.stream``; the last chunk carries the call's record."""
        started = self._registry.clock.monotonic()
        acquired, held = await self._acquire(scope, call, spec, timeout_s)
        record = acquired.info
        try:
            if held is not None:
                produced = False
                try:
                    async for chunk, info in self._generator.stream(
                            scope, call, held, self._left(timeout_s, started)):
                        produced = True
                        yield chunk, info
                    return
                except FailedPrecondition as err:
                    # A refusal comes before the first chunk, when the lease is checked.
                    if produced or err.reason is not Reason.LEASE_INVALID:
                        raise
                    record = _refused(acquired.info, err)
                except RegistryUnavailable:
                    if produced or self._registry.settings.failure_mode == "error":
                        raise
                    record = _unregistered(acquired.info)
            async for chunk, info in self._generator.stream(scope, call, "", self._left(timeout_s, started)):
                yield chunk, (record if info is not None else None)
        finally:
            if held is not None:
                await self._release(held)

    async def _release(self, held: HeldLease) -> None:
        with contextlib.suppress(RegistryUnavailable):  # the lease expires on its own
            await self._registry.release_issued(held.claims)

    async def _acquire(self, scope: Scope, call: ModelCall, spec: CallLease,
                       timeout_s: float | None) -> tuple[AcquireResult, HeldLease | None]:
        """The acquire's answer, and the lease it issued as this call holds it."""
        cut = len(call.contents) - spec.suffix
        view = PrefixView.of(Prefix.of_call(call, cut), self._bytes_per_token)
        deadline = self._registry.clock.monotonic() + timeout_s if timeout_s is not None else None
        # The whole request's size: what a MARKED create writes through to (domain.policy, rule 2).
        # Each content's canonical bytes and a separator: its list's length less one.
        suffix = len(canonical_list(call.contents[cut:])) - 1
        request_tokens = view.tokens + estimate_tokens(suffix, self._bytes_per_token)
        acquired = await self._registry.acquire(scope, view, spec.ttl_s, deadline, spec.holder, request_tokens)
        if not acquired.lease:
            return acquired, None
        # Every lease is issued in this process (LeaseIssuer.issue), with its claims.
        assert acquired.claims is not None
        return acquired, HeldLease(acquired.claims, view.chain)

    def _left(self, timeout_s: float | None, started: float) -> float | None:
        if timeout_s is None:
            return None
        return max(0.0, timeout_s - (self._registry.clock.monotonic() - started))


def _refused(acquired: CacheInfo, err: FailedPrecondition) -> CacheInfo:
    invalidated = err.metadata.get("invalid_reason") == "INVALIDATED"
    reason = BypassReason.INVALIDATED if invalidated else BypassReason.CACHE_MISSING
    return replace(acquired, state=CacheState.BYPASS, bypass_reason=reason, expire_time=None, uses=0)


def _unregistered(acquired: CacheInfo) -> CacheInfo:
    return replace(acquired, state=CacheState.BYPASS, bypass_reason=BypassReason.REGISTRY_UNAVAILABLE,
                   expire_time=None, uses=0)
