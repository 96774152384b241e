"""The model-call leg of a turn: lease, call and release through the cache
service, in domain terms.

Degrade, never lose:

- every cache failure *inside* the cache service (create refused, rate
  limited, too small, missing at the provider) already comes back as a
  BYPASS record on a successful call: nothing to do here;
- a lease the cache service refuses at call time (expired, invalidated,
  prefix or scope mismatch) is a cache failure too: the call is sent once
  more without it and recorded as BYPASS;
- the cache service itself unreachable, or silent past the call's
  deadline, is UNAVAILABLE CACHE_SERVICE_UNAVAILABLE with RetryInfo:
  without it there is no model call at all.

Provider resource names never reach this process: leases are opaque tokens
and the records are public metadata.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from google.protobuf import duration_pb2

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.type.v1 import generation_pb2
from agentctx_common.errors import AgentCtxError
from context_service.api.convert import cache_from_proto, content_from_proto, dict_to_struct, usage_from_proto
from context_service.domain import turns
from context_service.domain.config import CachePolicy
from context_service.domain.model import CacheInfo, Content, SessionKey

log = logging.getLogger("agentctx.context.turns")
T = TypeVar("T")

# ReleaseLease only lets a replaced cache go sooner: never wait long for it.
RELEASE_TIMEOUT_S = 2.0


class CachePort(Protocol):
    """What a turn needs of the cache service (``cache_client.CacheClient``)."""

    async def acquire_lease(self, request: cpb.AcquireLeaseRequest, *, remaining: float | None = None) -> Any: ...

    async def release_lease(self, lease: str, *, remaining: float | None = None) -> bool: ...

    async def generate_content(self, request: cpb.GenerateContentRequest, *, remaining: float | None = None) -> Any: ...

    def stream_generate_content(
        self, request: cpb.GenerateContentRequest, *, remaining: float | None = None
    ) -> AsyncIterator[Any]: ...


@dataclass(frozen=True, slots=True)
class Lease:
    """An opaque lease token (empty: the call goes uncached) and the public
    record AcquireLease returned."""

    token: str
    info: CacheInfo
    enabled: bool = True


def cache_scope(key: SessionKey, model: str, policy: CachePolicy) -> cpb.CacheScope:
    """The session's cache scope: the cache service's default provider, the
    app, the user, the model and the policy's scope labels."""
    scope = cpb.CacheScope(app=key.app, user=key.user, model=model)
    if policy.scope_policy:
        dict_to_struct(policy.scope_policy, scope.policy)
    return scope


def cache_prefix(request: generation_pb2.ModelRequest, input_count: int) -> cpb.CachePrefix:
    """The stable start of ``request``: instruction, tools, tool config and
    every content before the current input (memory included)."""
    prefix = cpb.CachePrefix(
        tools=request.tools, history=request.contents[: len(request.contents) - input_count]
    )
    if request.HasField("system_instruction"):
        prefix.system_instruction.CopyFrom(request.system_instruction)
    if request.HasField("tool_config"):
        prefix.tool_config.CopyFrom(request.tool_config)
    return prefix


def _finish_reason(value: int) -> str:
    name = generation_pb2.FinishReason.Name(value).removeprefix("FINISH_REASON_")
    return "" if name == "UNSPECIFIED" else name


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
        scope: cpb.CacheScope,
        request: generation_pb2.ModelRequest,
        input_count: int,
        policy: CachePolicy,
        deadline: turns.Deadline,
    ) -> Lease:
        if not policy.enabled:
            return Lease("", turns.disabled_record(), enabled=False)
        call = cpb.AcquireLeaseRequest(scope=scope, prefix=cache_prefix(request, input_count))
        if policy.ttl_s is not None:
            call.ttl.CopyFrom(_duration(policy.ttl_s))
        answer = await self._guard(self._client.acquire_lease(call, remaining=deadline.remaining()), deadline)
        return Lease(answer.lease, cache_from_proto(answer.metadata))

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
        self, scope: cpb.CacheScope, request: generation_pb2.ModelRequest, lease: Lease, deadline: turns.Deadline
    ) -> turns.ModelAnswer:
        call = cpb.GenerateContentRequest(scope=scope, request=request, lease=lease.token)
        try:
            answer = await self._guard(self._client.generate_content(call, remaining=deadline.remaining()), deadline)
        except AgentCtxError as err:
            if not lease.token or err.reason not in turns.LEASE_REFUSALS:
                raise
            log.info("lease refused; calling uncached", extra={"reason": err.reason})
            call.lease = ""
            answer = await self._guard(self._client.generate_content(call, remaining=deadline.remaining()), deadline)
            info = turns.refused_record(lease.info, turns.lease_refusal_reason(err))
        else:
            info = self._record(lease, cache_from_proto(answer.cache) if answer.HasField("cache") else None)
        response = answer.response
        return turns.ModelAnswer(
            content=content_from_proto(response.content),
            usage=usage_from_proto(response.usage) if response.HasField("usage") else None,
            cache=info,
            finish_reason=_finish_reason(response.finish_reason),
            model_version=response.model_version,
        )

    async def stream(
        self, scope: cpb.CacheScope, request: generation_pb2.ModelRequest, lease: Lease, deadline: turns.Deadline
    ) -> AsyncIterator[Content | turns.ModelAnswer]:
        """The reply's chunks as they arrive (contents with parts), then the
        whole answer. A refused lease is retried uncached only before any
        chunk was produced."""
        call = cpb.GenerateContentRequest(scope=scope, request=request, lease=lease.token)
        chunks: list[Content] = []
        last: Any = None
        served: CacheInfo | None = None
        refused: AgentCtxError | None = None
        while True:
            try:
                async for item in self._client.stream_generate_content(call, remaining=deadline.remaining()):
                    content = content_from_proto(item.chunk.content)
                    if content.parts:
                        chunks.append(content)
                        yield content
                    last = item.chunk
                    if item.HasField("cache"):
                        served = cache_from_proto(item.cache)
                break
            except AgentCtxError as err:
                if turns.is_transport_failure(err, deadline):
                    raise turns.cache_service_unavailable(err) from None
                if chunks or not call.lease or err.reason not in turns.LEASE_REFUSALS:
                    raise
                log.info("lease refused; streaming uncached", extra={"reason": err.reason})
                call.lease, refused = "", err
        if refused is not None:
            info = turns.refused_record(lease.info, turns.lease_refusal_reason(refused))
        else:
            info = self._record(lease, served)
        yield turns.ModelAnswer(
            content=turns.merge_chunks(chunks),
            usage=usage_from_proto(last.usage) if last is not None and last.HasField("usage") else None,
            cache=info,
            finish_reason=_finish_reason(last.finish_reason) if last is not None else "",
            model_version=last.model_version if last is not None else "",
        )


def _duration(seconds: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromNanoseconds(int(seconds * 1e9))
    return out
