"""The model-call leg of a turn: lease, call and release through the cache
service, in domain terms.

Degrade, never lose:

- every cache failure *inside* the cache service (create refused, rate
  limited, too small, missing at the provider) already comes back as a
  BYPASS record on a successful call: nothing to do here;
- a lease the cache service refuses at call time (expired, invalidated,
  prefix or scope mismatch) is a cache failure too: the call is sent once
  more without it and recorded as BYPASS;
- a cache service without AcquireLease (another version) cannot cache:
  the call goes uncached, recorded as BYPASS UNSUPPORTED; one without
  ReleaseLease lets its leases expire (release is best effort anyway);
- the cache service itself unreachable, or silent past the call's
  deadline, is UNAVAILABLE CACHE_SERVICE_UNAVAILABLE with RetryInfo:
  without it there is no model call at all; one without GenerateContent
  is FAILED_PRECONDITION CACHE_SERVICE_INCOMPATIBLE (a deployment to fix,
  not a moment to wait out).

Provider resource names never reach this process: leases are opaque tokens
and the records are public metadata.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TypeVar

from agentctx_common.errors import AgentCtxError
from agentctx_common.reasons import Reason
from context_service.building.types import BuiltContext
from context_service.domain import turns
from context_service.domain.cache_calls import CacheScope, ModelReply
from context_service.domain.config import CachePolicy
from context_service.domain.model import CacheInfo, CacheState, Content, SessionKey
from context_service.ports import CachePort

log = logging.getLogger("agentctx.context.turns")
T = TypeVar("T")

# ReleaseLease only lets a replaced cache go sooner: never wait long for it.
RELEASE_TIMEOUT_S = 2.0
# The record of a call a cache service without AcquireLease served uncached.
UNSUPPORTED = CacheInfo(state=CacheState.BYPASS, bypass_reason="UNSUPPORTED")


@dataclass(frozen=True, slots=True)
class Lease:
    """An opaque lease token (empty: the call goes uncached) and the public
    record AcquireLease returned."""

    token: str
    info: CacheInfo
    enabled: bool = True


def cache_scope(key: SessionKey, model: str, policy: CachePolicy) -> CacheScope:
    """The session's cache scope: the cache service's default provider, the
    app, the user, the model and the policy's scope labels."""
    return CacheScope(app=key.app, user=key.user, model=model, policy=policy.scope_policy or None)


class ModelGateway:
    def __init__(self, client: CachePort) -> None:
        self._client = client

    async def _guard(self, call: Awaitable[T], deadline: turns.Deadline) -> T:
        try:
            return await call
        except AgentCtxError as err:
            if turns.is_transport_failure(err, deadline):
                raise turns.cache_service_unavailable(err) from None
            raise

    # --- lease ----------------------------------------------------------------

    async def acquire(
        self,
        scope: CacheScope,
        request: BuiltContext,
        input_count: int,
        policy: CachePolicy,
        deadline: turns.Deadline,
    ) -> Lease:
        if not policy.enabled:
            return Lease("", turns.disabled_record(), enabled=False)
        try:
            grant = await self._guard(
                self._client.acquire_lease(
                    scope, request, input_count=input_count, ttl_s=policy.ttl_s, remaining=deadline.remaining()
                ),
                deadline,
            )
        except AgentCtxError as err:
            if err.reason is not Reason.CACHE_SERVICE_INCOMPATIBLE:
                raise
            # A cache service without leases can still call the model.
            log.info("the cache service has no AcquireLease; calling uncached", extra={"reason": err.reason})
            return Lease("", UNSUPPORTED)
        return Lease(grant.token, grant.info)

    async def release(self, lease: Lease, deadline: turns.Deadline) -> None:
        """Best effort: an unreleased lease expires on its own."""
        if not lease.token:
            return
        remaining = deadline.remaining()
        try:
            await self._client.release_lease(
                lease.token, remaining=RELEASE_TIMEOUT_S if remaining is None else min(remaining, RELEASE_TIMEOUT_S)
            )
        except AgentCtxError as err:
            log.debug("lease not released", extra={"code": err.code.value, "reason": err.reason})

    # --- calls ----------------------------------------------------------------

    def _record(self, lease: Lease, served: CacheInfo | None) -> CacheInfo:
        if not lease.enabled:
            return turns.disabled_record(served.scope_fingerprint if served is not None else "")
        return turns.cache_record(acquired=lease.info, served=served, leased=bool(lease.token))

    async def generate(
        self, scope: CacheScope, request: BuiltContext, lease: Lease, deadline: turns.Deadline
    ) -> turns.ModelAnswer:
        try:
            reply = await self._guard(
                self._client.generate(scope, request, lease=lease.token, remaining=deadline.remaining()), deadline
            )
        except AgentCtxError as err:
            if not lease.token or err.reason not in turns.LEASE_REFUSALS:
                raise
            log.info("lease refused; calling uncached", extra={"reason": err.reason})
            reply = await self._guard(
                self._client.generate(scope, request, lease="", remaining=deadline.remaining()), deadline
            )
            info = turns.refused_record(lease.info, turns.lease_refusal_reason(err))
        else:
            info = self._record(lease, reply.served)
        return turns.ModelAnswer(
            content=reply.content, usage=reply.usage, cache=info,
            finish_reason=reply.finish_reason, model_version=reply.model_version,
        )

    async def stream(
        self, scope: CacheScope, request: BuiltContext, lease: Lease, deadline: turns.Deadline
    ) -> AsyncIterator[Content | turns.ModelAnswer]:
        """The reply's chunks as they arrive (contents with parts), then the
        whole answer. A refused lease is retried uncached only before any
        chunk was produced."""
        token = lease.token
        chunks: list[Content] = []
        last: ModelReply | None = None
        served: CacheInfo | None = None
        refused: AgentCtxError | None = None
        while True:
            try:
                async for item in self._client.stream_generate(scope, request, lease=token, remaining=deadline.remaining()):
                    if item.content.parts:
                        chunks.append(item.content)
                        yield item.content
                    last = item
                    if item.served is not None:
                        served = item.served
                break
            except AgentCtxError as err:
                if turns.is_transport_failure(err, deadline):
                    raise turns.cache_service_unavailable(err) from None
                if chunks or not token or err.reason not in turns.LEASE_REFUSALS:
                    raise
                log.info("lease refused; streaming uncached", extra={"reason": err.reason})
                token, refused = "", err
        if refused is not None:
            info = turns.refused_record(lease.info, turns.lease_refusal_reason(refused))
        else:
            info = self._record(lease, served)
        yield turns.ModelAnswer(
            content=turns.merge_chunks(chunks),
            usage=last.usage if last is not None else None,
            cache=info,
            finish_reason=last.finish_reason if last is not None else "",
            model_version=last.model_version if last is not None else "",
        )
