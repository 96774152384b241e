"""Model calls, with or without a lease.

With a lease: the lease is checked (signature, scope, generation, expiry),
the request's leading system instruction, tools, tool config and contents
must equal the leased prefix (else FAILED_PRECONDITION
LEASE_PREFIX_MISMATCH), and the provider receives what its cache kind needs
(domain.capabilities): a NAMED provider a *new* request naming the cache and
carrying only the uncached suffix, without system instruction, tools or tool
config; a MARKED or AUTOMATIC one the whole request and where its leased
prefix ends (a successful call extends the entry to the provider's TTL). The
caller's request is never modified.

A cache the provider no longer holds (CacheNotFound: 404, or 403 naming the
cached content) is dropped from the registry and the original request is
sent once more uncached (BYPASS CACHE_MISSING), but only if the provider
has produced no output yet: once a stream has produced a chunk, the failure
is returned (UNAVAILABLE, reason CACHE_MISSING) instead of a second answer.

A leased call's record and usage are what the provider reported
(domain.observed): a NAMED create's tokens are the creating call's
``cache_write_tokens`` (the first call its lease served: the registry
store answers ``report_create`` once per entry, on every replica; the
lease's later calls are HITs); a MARKED call that wrote and read nothing
was below the provider's floor, so it is a BYPASS BELOW_MIN_TOKENS, its
entry is forgotten and the floor learned for the model (kept
``learned_floor_keep_s``), while one that wrote or read lowers a floor
learned above what it marked.

Provider errors map to statuses: rate limit -> RESOURCE_EXHAUSTED
RATE_LIMITED with RetryInfo; context-window overflow -> INVALID_ARGUMENT
CONTEXT_WINDOW_EXCEEDED (prompt_tokens, context_window); unavailable ->
UNAVAILABLE with RetryInfo; timeout -> DEADLINE_EXCEEDED; bad request ->
INVALID_ARGUMENT PROVIDER_INVALID_REQUEST; other denials -> PERMISSION_DENIED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace

from opentelemetry import trace

from agentctx_common.errors import (
    AgentCtxError,
    DeadlineExceeded,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from agentctx_common.reasons import Reason
from cache_service.domain import capabilities
from cache_service.domain.capabilities import rewrite_for_cache
from cache_service.domain.entry import Entry
from cache_service.domain.keys import Prefix, Scope, call_chain, canonical_size, estimate_tokens
from cache_service.domain.model import BypassReason, CacheInfo, CacheState, LeaseClaims, ModelCall, ModelReply
from cache_service.domain.observed import learned_floor, marked_tokens, observe
from cache_service.domain.ports import (
    CacheKind,
    CacheNotFound,
    CacheRef,
    CacheTooSmall,
    ContextWindowExceeded,
    InvalidRequest,
    LeaseRejected,
    PrefixMark,
    Provider,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    RateLimited,
    RegistryUnavailable,
    UnsupportedField,
)
from cache_service.domain.registry import Registry

__all__ = ["Generator", "HeldLease", "lease_error", "provider_error_status", "rewrite_for_cache"]

log = logging.getLogger("agentctx.cache.generate")
_CREATES = (CacheState.CREATED, CacheState.GROWN)
_tracer = trace.get_tracer("agentctx.cache")


def provider_error_status(exc: ProviderError) -> AgentCtxError:
    """The status a provider failure maps to. Messages are our own fixed text."""
    if isinstance(exc, RateLimited):
        return ResourceExhausted("the model provider rate-limited the call", reason=Reason.RATE_LIMITED,
                                 retry_after=exc.retry_after if exc.retry_after is not None else 1.0)
    if isinstance(exc, ContextWindowExceeded):
        metadata = {k: v for k, v in (("prompt_tokens", exc.prompt_tokens), ("context_window", exc.context_window))
                    if v is not None}
        return InvalidArgument("the request exceeds the model's context window", reason=Reason.CONTEXT_WINDOW_EXCEEDED,
                               metadata=metadata)
    if isinstance(exc, ProviderTimeout):
        return DeadlineExceeded("the model provider did not answer in time", reason=Reason.PROVIDER_TIMEOUT)
    if isinstance(exc, UnsupportedField):
        return InvalidArgument.fields([FieldViolation(exc.field, exc.description)])
    if isinstance(exc, (InvalidRequest, CacheTooSmall)):
        return InvalidArgument("the model provider rejected the request", reason=Reason.PROVIDER_INVALID_REQUEST,
                               metadata={"provider_status": exc.status or 0})
    if isinstance(exc, ProviderPermissionDenied):
        return PermissionDenied("the model provider denied the call", reason=Reason.PROVIDER_PERMISSION_DENIED)
    if isinstance(exc, CacheNotFound):
        return Unavailable("the provider lost the cache after output was sent; retry the call",
                           reason=Reason.CACHE_MISSING, retry_after=0.0)
    return Unavailable("the model provider is unavailable", reason=Reason.PROVIDER_UNAVAILABLE,
                       retry_after=exc.retry_after if exc.retry_after is not None else 1.0)


def lease_error(exc: LeaseRejected) -> FailedPrecondition:
    return FailedPrecondition(f"the lease cannot be used ({exc.invalid_reason.lower()}); acquire a new one",
                              reason=Reason.LEASE_INVALID, metadata={"invalid_reason": exc.invalid_reason})


@dataclass(frozen=True)
class HeldLease:
    """A lease this process issued for one call and holds
    (domain.call_lease), used in place of its token: its claims (genuine,
    so not verified again) and the chain digests the acquire computed over
    the call's prefix (so the prefix check hashes nothing again)."""

    claims: LeaseClaims
    chain: tuple[bytes, ...]


class Generator:
    def __init__(self, registry: Registry, *, request_timeout_s: float = 60.0,
                 routing_keys: capabilities.RoutingKeys | None = None, bytes_per_token: float = 4.0) -> None:
        self.registry = registry
        self.request_timeout_s = request_timeout_s
        self.bytes_per_token = bytes_per_token
        # prompt_cache_key under the tier's secret (a per-process one by default).
        self.routing_keys = routing_keys or capabilities.RoutingKeys()

    # --- unary --------------------------------------------------------------------

    async def generate(self, scope: Scope, call: ModelCall, lease: str | HeldLease,
                       timeout_s: float | None = None) -> tuple[ModelReply, CacheInfo]:
        provider = self.registry.provider(scope.provider)
        timeout = self._timeout(timeout_s)
        with _tracer.start_as_current_span("cache.generate", attributes={
            "cache.provider": scope.provider, "cache.leased": bool(lease), "cache.contents": len(call.contents),
        }) as span:
            unleased = capabilities.unleased_ref(provider, scope.app, call, self.registry.settings.default_ttl_s,
                                                 self.routing_keys)
            if not lease:
                reply = await self._call(lambda: provider.generate(call, unleased), timeout)
                return reply, CacheInfo(scope_fingerprint=scope.fingerprint)
            entry, state = await self._leased(scope, call, lease)
            leased_call, ref = capabilities.leased_request(provider, call, entry, self.routing_keys,
                                                           state is CacheState.CREATED)
            try:
                reply = await self._call(lambda: provider.generate(leased_call, ref), timeout, passthrough=CacheNotFound)
            except CacheNotFound:
                span.set_attribute("cache.missing_retry", True)
                info = await self._drop(entry)
                reply = await self._call(lambda: provider.generate(call, unleased), timeout)
                return reply, info
            return await self._observed(provider, call, ref, entry, state, reply)

    # --- streaming ----------------------------------------------------------------

    async def stream(self, scope: Scope, call: ModelCall, lease: str | HeldLease,
                     timeout_s: float | None = None) -> AsyncIterator[tuple[ModelReply, CacheInfo | None]]:
        """Chunks as the provider sends them; the last one carries the usage
        and the cache info. Only a chunk that looks final (a finish reason or
        usage) is held back to learn whether more follow; if the stream ends
        without one, a content-free last chunk carries the cache info."""
        provider = self.registry.provider(scope.provider)
        timeout = self._timeout(timeout_s)
        info = CacheInfo(scope_fingerprint=scope.fingerprint)
        entry: Entry | None = None
        served: CacheRef | None = None  # what the leased call that served the stream was told
        if lease:
            entry, state = await self._leased(scope, call, lease)
            info = self.registry.info(entry, state)
        deadline = asyncio.get_running_loop().time() + timeout
        produced = False
        held: ModelReply | None = None
        version = ""
        chunks = 0
        # Not made current: a generator's context changes at every yield.
        span = _tracer.start_span("cache.generate", attributes={
            "cache.provider": scope.provider, "cache.leased": bool(lease), "cache.contents": len(call.contents),
            "cache.streamed": True,
        })
        try:
            if entry is not None:
                leased_call, ref = capabilities.leased_request(provider, call, entry, self.routing_keys,
                                                           state is CacheState.CREATED)
                try:
                    async for chunk in _bounded(provider.stream_generate(leased_call, ref), deadline):
                        produced, version = True, chunk.model_version
                        for out in _release(held, chunk):
                            chunks += 1
                            yield out, None
                        held = chunk if _looks_final(chunk) else None
                except CacheNotFound:
                    if produced:
                        await self._drop(entry)
                        raise
                    span.set_attribute("cache.missing_retry", True)
                    info = await self._drop(entry)
                    entry = None
                else:
                    served = ref
            if entry is None:
                unleased = capabilities.unleased_ref(provider, scope.app, call,
                                                     self.registry.settings.default_ttl_s, self.routing_keys)
                async for chunk in _bounded(provider.stream_generate(call, unleased), deadline):
                    produced, version = True, chunk.model_version
                    for out in _release(held, chunk):
                        chunks += 1
                        yield out, None
                    held = chunk if _looks_final(chunk) else None
            if held is None and produced:
                held = ModelReply(content=None, model_version=version)
            if held is not None and served is not None and entry is not None:
                held, info = await self._observed(provider, call, served, entry, state, held)
            elif served is not None and entry is not None:
                info = self.registry.info(await self._touch(provider, entry), state)
            if held is not None:
                chunks += 1
                yield held, info
        except ProviderError as exc:
            span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
            raise provider_error_status(exc) from None
        except TimeoutError:
            span.set_status(trace.StatusCode.ERROR, "ProviderTimeout")
            raise provider_error_status(ProviderTimeout()) from None
        finally:
            span.set_attribute("cache.chunks", chunks)
            span.end()

    # --- helpers ------------------------------------------------------------------

    async def _leased(self, scope: Scope, call: ModelCall, lease: str | HeldLease) -> tuple[Entry, CacheState]:
        held = lease if isinstance(lease, HeldLease) else None
        try:
            shared = self.registry.shared_fingerprint(scope)
            if held is not None:
                entry, claims = await self.registry.resolve_claims(held.claims, scope.fingerprint, shared)
            else:
                entry, claims = await self.registry.resolve(str(lease), scope.fingerprint, shared)
        except LeaseRejected as exc:
            raise lease_error(exc) from None
        n = entry.history_len
        if len(call.contents) <= n:
            raise InvalidArgument(
                "the request carries no contents after the leased prefix", reason=Reason.EMPTY_SUFFIX,
                metadata={"contents": len(call.contents), "prefix_contents": n},
                field_violations=[FieldViolation("request.contents", "must extend the leased prefix")],
            )
        # A held lease's prefix was hashed by its acquire: chain[n] is call_chain(call, n).
        digest = held.chain[n] if held is not None and n < len(held.chain) else call_chain(call, n)
        if digest != entry.digest:
            raise FailedPrecondition(
                "the request does not start with the leased prefix", reason=Reason.LEASE_PREFIX_MISMATCH,
                metadata={"prefix_fingerprint": entry.prefix_fp, "prefix_contents": n},
            )
        return entry, CacheState(claims.state)

    async def _observed(self, provider: Provider, call: ModelCall, ref: CacheRef, entry: Entry, state: CacheState,
                        reply: ModelReply) -> tuple[ModelReply, CacheInfo]:
        """The leased call's reply and record as the provider reported them
        (domain.observed): a NAMED create reported on the first call its
        lease served; a MARKED prefix below the floor is forgotten and the
        floor learned, else a floor learned above it lowered and the entry
        touched."""
        store, wall = self.registry.store, self.registry.clock.wall()
        creator = True
        if provider.cache_kind is CacheKind.NAMED and state in _CREATES and reply.usage is not None:
            with contextlib.suppress(RegistryUnavailable):  # the call is made: its usage says the create
                creator = await store.report_create(entry.id)
        seen = observe(provider.cache_kind, reply.usage, self.registry.info(entry, state), entry.tokens,
                       creator=creator)
        await self.registry.admission.settle(provider, entry, seen.usage, seen.info.state in _CREATES)
        through = isinstance(ref, PrefixMark) and ref.write_through
        request = self._request_tokens(call) if through and (seen.below_floor or seen.above_floor) else 0
        if not seen.below_floor:
            if seen.above_floor:
                with contextlib.suppress(RegistryUnavailable):  # lowered by a later call
                    await store.lower_floor(entry.provider, entry.scope.model,
                                            marked_tokens(entry.tokens, request, through), wall)
            return replace(reply, usage=seen.usage), self.registry.info(await self._touch(provider, entry),
                                                                        seen.info.state)
        floor = learned_floor(entry.tokens, request, through)
        log.info("the provider cached nothing of a marked call: below its floor",
                 extra={"entry": entry.id, "learned_floor": floor})
        await store.learn_floor(entry.provider, entry.scope.model, floor, wall,
                                self.registry.settings.learned_floor_keep_s)
        await self.registry.drop_missing(entry)
        return reply, seen.info

    def _request_tokens(self, call: ModelCall) -> int:
        """The whole request's estimated size (measured, not hashed)."""
        return estimate_tokens(canonical_size(Prefix.of_call(call, len(call.contents))), self.bytes_per_token)

    async def _touch(self, provider: Provider, entry: Entry) -> Entry:
        """A MARKED or AUTOMATIC provider keeps a prefix its TTL past each
        read: so does the entry."""
        if provider.cache_kind is CacheKind.NAMED:
            return entry
        expire = self.registry.clock.wall() + provider.prefix_ttl_s(entry.ttl_s)
        return await self.registry.store.set_expiry(entry.id, expire) or entry

    async def _drop(self, entry: Entry) -> CacheInfo:
        log.info("cache missing at the provider; sent uncached", extra={"entry": entry.id})
        await self.registry.drop_missing(entry)
        info = self.registry.info(entry, CacheState.BYPASS)
        return replace(info, bypass_reason=BypassReason.CACHE_MISSING, expire_time=None)

    def _timeout(self, timeout_s: float | None) -> float:
        return self.request_timeout_s if timeout_s is None else max(0.0, min(timeout_s, self.request_timeout_s))

    @staticmethod
    async def _call(fn: Callable[[], Awaitable[ModelReply]], timeout: float,  # noqa: ASYNC109 - a budget passed on, not a cancel scope
                    passthrough: type[ProviderError] | None = None) -> ModelReply:
        try:
            async with asyncio.timeout(timeout):
                return await fn()
        except ProviderError as exc:
            if passthrough is not None and isinstance(exc, passthrough):
                raise
            raise provider_error_status(exc) from None
        except TimeoutError:
            raise provider_error_status(ProviderTimeout()) from None


async def _bounded(chunks: AsyncIterator[ModelReply], deadline: float) -> AsyncIterator[ModelReply]:
    """The provider's chunks, each awaited under the call's deadline. The
    deadline scope never spans a yield, so it can only cancel provider I/O."""
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            yield chunk


def _looks_final(chunk: ModelReply) -> bool:
    return bool(chunk.finish_reason) or chunk.usage is not None


def _release(held: ModelReply | None, chunk: ModelReply) -> list[ModelReply]:
    """What to send now that ``chunk`` arrived: a held chunk (it was not the
    last after all), and ``chunk`` itself unless it may be the last."""
    out = [held] if held is not None else []
    if not _looks_final(chunk):
        out.append(chunk)
    return out
