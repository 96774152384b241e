"""The model-call leg of a turn through the cache service, in domain terms:
one GenerateContent (or StreamGenerateContent) that leases the stable
prefix for itself (``acquire``): the cache service acquires the lease,
calls the model with it and releases it in the same round trip, so a turn
pays one call to the cache service, not three, and sends its prefix once.

Degrade, never lose:

- every cache failure *inside* the cache service (create refused, rate
  limited, too small, missing at the provider, a lease invalidated between
  its acquire and the call) comes back as a BYPASS record on a successful
  call: nothing to do here;
- a cache service that does not lease in the call (another version) says
  nothing of the cache (state unspecified): the call went uncached,
  recorded as BYPASS UNSUPPORTED;
- the cache service itself unreachable, or silent past the call's
  deadline, is UNAVAILABLE CACHE_SERVICE_UNAVAILABLE with RetryInfo:
  without it there is no model call at all; one without GenerateContent
  is FAILED_PRECONDITION CACHE_SERVICE_INCOMPATIBLE (a deployment to fix,
  not a moment to wait out).

The holder the lease names is a digest of the session's name: the cache
service learns no session name, yet can tell that this conversation's
new prefix superseded (compaction) the cache it used before and delete
it. Provider resource names never reach this process, nor do leases: the
records are public metadata.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from agentctx_common.errors import AgentCtxError
from context_service.building.types import BuiltContext
from context_service.domain import turn_rules
from context_service.domain.cache_calls import CacheScope, LeaseRequest, ModelReply
from context_service.domain.config import CachePolicy
from context_service.domain.model import CacheInfo, CacheState, Content, SessionKey
from context_service.ports import CachePort

log = logging.getLogger("agentctx.context.turns")
T = TypeVar("T")

# The record of a call a cache service that does not lease in the call served.
UNSUPPORTED = CacheInfo(state=CacheState.BYPASS, bypass_reason="UNSUPPORTED")


def cache_scope(key: SessionKey, model: str, policy: CachePolicy) -> CacheScope:
    """The session's cache scope: the cache service's default provider, the
    app, the user, the model and the policy's scope labels."""
    return CacheScope(app=key.app, user=key.user, model=model, policy=policy.scope_policy or None)


def lease_request(key: SessionKey, policy: CachePolicy, input_count: int) -> LeaseRequest | None:
    """The in-call lease of a turn whose last ``input_count`` contents are
    its current input with the memory and attachments placed in it (at
    least the last content is left uncached), or None with caching off."""
    if not policy.enabled:
        return None
    holder = hashlib.sha256(f"{key.app}/{key.user}/{key.session}".encode()).hexdigest()[:32]
    return LeaseRequest(suffix=max(1, input_count), ttl_s=policy.ttl_s, holder=holder)


class ModelGateway:
    def __init__(self, client: CachePort) -> None:
        self._client = client

    async def _guard(self, call: Awaitable[T], deadline: turn_rules.Deadline) -> T:
        try:
            return await call
        except AgentCtxError as err:
            if turn_rules.is_transport_failure(err, deadline):
                raise turn_rules.cache_service_unavailable(err) from None
            raise

    # --- calls ----------------------------------------------------------------

    @staticmethod
    def _record(lease: LeaseRequest | None, served: CacheInfo | None) -> CacheInfo:
        if lease is None:
            return turn_rules.disabled_record(served.scope_fingerprint if served is not None else "")
        if served is None or served.state is CacheState.UNSPECIFIED:
            return UNSUPPORTED
        return served  # HIT / CREATED / GROWN, or BYPASS with its reason

    async def generate(
        self, scope: CacheScope, request: BuiltContext, lease: LeaseRequest | None, deadline: turn_rules.Deadline
    ) -> turn_rules.ModelAnswer:
        reply = await self._guard(
            self._client.generate(scope, request, acquire=lease, remaining=deadline.remaining()), deadline
        )
        return turn_rules.ModelAnswer(
            content=reply.content, usage=reply.usage, cache=self._record(lease, reply.served),
            finish_reason=reply.finish_reason, model_version=reply.model_version,
        )

    async def stream(
        self, scope: CacheScope, request: BuiltContext, lease: LeaseRequest | None, deadline: turn_rules.Deadline
    ) -> AsyncIterator[Content | turn_rules.ModelAnswer]:
        """The reply's chunks as they arrive (contents with parts), then the
        whole answer."""
        chunks: list[Content] = []
        last: ModelReply | None = None
        served: CacheInfo | None = None
        try:
            async for item in self._client.stream_generate(scope, request, acquire=lease, remaining=deadline.remaining()):
                if item.content.parts:
                    chunks.append(item.content)
                    yield item.content
                last = item
                if item.served is not None:
                    served = item.served
        except AgentCtxError as err:
            if turn_rules.is_transport_failure(err, deadline):
                raise turn_rules.cache_service_unavailable(err) from None
            raise
        yield turn_rules.ModelAnswer(
            content=turn_rules.merge_chunks(chunks),
            usage=last.usage if last is not None else None,
            cache=self._record(lease, served),
            finish_reason=last.finish_reason if last is not None else "",
            model_version=last.model_version if last is not None else "",
        )
