"""The lease registry: provider caches by scope and prefix, behind leases.

An entry is one provider cache, keyed by scope (provider, app, user, model,
policy), prefix (its chain digest) and TTL. ``acquire`` applies the create
policy (domain.policy) and returns a signed lease or a bypass:

- Single flight: concurrent misses for one key join one create. Each waiter
  has an absolute deadline; when the create finishes, every waiter is
  rechecked against the clock *at that moment* (a result that arrived in
  time but is handled late still counts as late). Late waiters get BYPASS
  DEADLINE_EXCEEDED. A cache nobody waits for any more, or created for a
  scope invalidated meanwhile, is deleted through the bounded cleanup path
  instead of becoming an unreachable entry.
- Bounds: ``max_entries`` live caches (in-flight creates reserve a slot; the
  least recently used cache without a live lease is evicted and deleted),
  ``max_prefix_bytes``, ``max_scope_bytes``, ``max_waiters`` per key,
  create deadline, default and max TTL.
- Lifecycle: a cache is deleted when it expires, is evicted, invalidated,
  found missing, or replaced by a grown cache *and* no live lease still
  names it. A failed provider call never counts as a deletion.
- ``failure_mode``: "bypass" turns cache failures (create refused or
  failed, rate limits, capacity, deadlines, invalidation) into BYPASS
  results; "error" raises them. Policy bypasses (first sighting, small or
  empty prefix) are never errors.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from opentelemetry import metrics, trace

from agentctx_common.errors import (
    Aborted,
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
from cache_service.domain import policy
from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import Clock
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.leases import LeaseClaims, LeaseRejected, LeaseSigner
from cache_service.domain.model import BypassReason, CacheInfo, CacheState
from cache_service.domain.ports import Journal
from cache_service.providers.base import (
    CacheHandle,
    CacheSpec,
    CacheTooSmall,
    ContextWindowExceeded,
    InvalidRequest,
    Provider,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)

log = logging.getLogger("agentctx.cache.registry")
_tracer = trace.get_tracer("agentctx.cache")
_meter = metrics.get_meter("agentctx.cache")
_acquires = _meter.create_counter("agentctx.cache.acquires", description="AcquireLease outcomes.")
_creates = _meter.create_counter("agentctx.cache.creates", description="Provider cache creates by outcome.")

_TOMBSTONES = 4096
# Failures that mean "no cache this time", as opposed to policy decisions.
_FAILURE_ERRORS: dict[BypassReason, tuple[type[AgentCtxError], str]] = {
    BypassReason.CREATE_FAILED: (Unavailable, Reason.CACHE_CREATE_FAILED),
    BypassReason.RATE_LIMITED: (ResourceExhausted, Reason.RATE_LIMITED),
    BypassReason.DEADLINE_EXCEEDED: (DeadlineExceeded, Reason.CACHE_DEADLINE_EXCEEDED),
    BypassReason.CAPACITY: (ResourceExhausted, Reason.CACHE_CAPACITY),
    BypassReason.INVALIDATED: (Aborted, Reason.CACHE_INVALIDATED),
    BypassReason.UNAVAILABLE: (Unavailable, Reason.PROVIDER_UNAVAILABLE),
}


@dataclass(frozen=True)
class RegistrySettings:
    failure_mode: str = "bypass"
    default_ttl_s: float = 300.0
    max_ttl_s: float = 3600.0
    max_entries: int = 256
    max_prefix_bytes: int = 4 * 1024 * 1024
    max_scope_bytes: int = 16 * 1024
    max_waiters: int = 128
    max_sightings: int = 4096
    create_timeout_s: float = 5.0
    lease_ttl_s: float = 120.0
    expiry_margin_s: float = 2.0
    refresh_on_hit: bool = True
    # Grow without making the caller wait: it leases the cache it has, and
    # later calls get the grown one. Trades a cheaper turn for a faster one.
    grow_in_background: bool = False
    policy: policy.PolicySettings = field(default_factory=policy.PolicySettings)


@dataclass(frozen=True)
class AcquireResult:
    """A lease (empty on bypass) and the public metadata."""

    lease: str
    info: CacheInfo


@dataclass
class Entry:
    id: str
    generation: int
    scope: Scope
    scope_fp: str
    ttl_s: float
    prefix_fp: str
    history_len: int
    digest: bytes
    tokens: int
    size_bytes: int
    handle: CacheHandle
    last_used: float
    uses: int = 0
    leases: dict[str, float] = field(default_factory=dict)  # lease id -> expiry (wall)
    retiring: bool = False
    refreshing: bool = False

    @property
    def provider(self) -> str:
        return self.scope.provider


@dataclass
class _Waiter:
    deadline: float  # monotonic
    future: asyncio.Future[AcquireResult | AgentCtxError]
    gone: bool = False


@dataclass
class _Flight:
    key: tuple[bytes, float]
    scope: Scope
    scope_fp: str
    view: PrefixView
    ttl_s: float
    replaces: Entry | None
    waiters: list[_Waiter] = field(default_factory=list)
    cancelled: bool = False
    background: bool = False  # installed even when nobody waits for it


@dataclass
class _ScopeState:
    entries: dict[str, Entry] = field(default_factory=dict)
    by_key: dict[tuple[bytes, float], str] = field(default_factory=dict)  # (digest, ttl) -> entry id
    flights: dict[tuple[bytes, float], _Flight] = field(default_factory=dict)


@dataclass(frozen=True)
class ScopeStatus:
    scope_fingerprint: str
    entry_count: int
    inflight_count: int
    waiter_count: int
    prefix_bytes: int


class Registry:
    def __init__(
        self,
        providers: Mapping[str, Provider],
        journal: Journal,
        janitor: Janitor,
        clock: Clock,
        settings: RegistrySettings = RegistrySettings(),
        signer: LeaseSigner | None = None,
    ) -> None:
        self.providers = providers
        self.journal = journal
        self.janitor = janitor
        self.clock = clock
        self.settings = settings
        self.signer = signer or LeaseSigner()
        # Test seam: runs after a create's result arrived, before it is installed.
        self.after_create_result: Callable[[], Awaitable[None]] | None = None
        self._scopes: dict[str, _ScopeState] = {}
        self._by_id: dict[str, Entry] = {}
        self._tombstones: OrderedDict[str, str] = OrderedDict()  # entry id -> invalid reason
        self._sightings: OrderedDict[tuple[str, int, bytes], int] = OrderedDict()
        self._floors: dict[tuple[str, str], int] = {}  # (provider, model) -> learned minimum tokens
        self._generations = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._flight_count = 0
        self.orphans_deleted = 0

    # --- queries ------------------------------------------------------------------

    def normalize_ttl(self, ttl_s: float | None) -> float:
        if not ttl_s:
            return self.settings.default_ttl_s
        return max(1.0, min(float(ttl_s), self.settings.max_ttl_s))

    def provider(self, name: str) -> Provider:
        provider = self.providers.get(name)
        if provider is None:
            raise FailedPrecondition(
                f"provider {name!r} is not configured on this cache service", reason=Reason.PROVIDER_NOT_CONFIGURED,
                metadata={"provider": name},
            )
        return provider

    def check_scope(self, scope: Scope) -> None:
        size = scope.size_bytes
        if size > self.settings.max_scope_bytes:
            raise InvalidArgument(
                f"the scope is {size} bytes, over the limit of {self.settings.max_scope_bytes}",
                reason=Reason.SCOPE_TOO_LARGE,
                metadata={"scope_bytes": size, "max_scope_bytes": self.settings.max_scope_bytes},
                field_violations=[FieldViolation("scope.policy", "the scope is too large")],
            )

    def status(self, scope: Scope) -> ScopeStatus:
        fp = scope.fingerprint
        state = self._scopes.get(fp)
        if state is None:
            return ScopeStatus(fp, 0, 0, 0, 0)
        return ScopeStatus(
            fp,
            entry_count=len(state.entries),
            inflight_count=len(state.flights),
            waiter_count=sum(_live_waiters(f) for f in state.flights.values()),
            prefix_bytes=sum(e.size_bytes for e in state.entries.values()),
        )

    @property
    def entry_count(self) -> int:
        return len(self._by_id)

    def entries(self) -> list[Entry]:
        return list(self._by_id.values())

    # --- acquire ------------------------------------------------------------------

    async def acquire(self, scope: Scope, view: PrefixView, ttl_s: float | None, deadline: float | None) -> AcquireResult:
        """A lease on a cache for ``view`` in ``scope``, or a bypass.
        ``deadline`` is absolute, on the registry clock's monotonic reading."""
        self.check_scope(scope)
        provider = self.provider(scope.provider)
        ttl = self.normalize_ttl(ttl_s)
        sfp = scope.fingerprint
        base = CacheInfo(prefix_fingerprint=view.fingerprint, prefix_tokens=view.tokens, scope_fingerprint=sfp)
        now = self.clock.monotonic()
        limit = now + self.settings.create_timeout_s + 1.0
        deadline = limit if deadline is None else min(deadline, limit)
        with _tracer.start_as_current_span("cache.acquire", attributes={
            "cache.provider": scope.provider, "cache.prefix_tokens": view.tokens,
            "cache.prefix_bytes": view.size_bytes, "cache.scope_fingerprint": sfp[:16],
        }) as span:
            outcome = await self._acquire(scope, sfp, provider, view, ttl, deadline, base)
            info = outcome.info if isinstance(outcome, AcquireResult) else None
            state = info.state.value if info else "ERROR"
            reason = info.bypass_reason.value if info else getattr(outcome, "reason", "")
            span.set_attribute("cache.state", state)
            span.set_attribute("cache.bypass_reason", reason)
            _acquires.add(1, {"provider": scope.provider, "state": state, "reason": reason})
        if isinstance(outcome, AgentCtxError):
            raise outcome
        return outcome

    async def _acquire(self, scope: Scope, sfp: str, provider: Provider, view: PrefixView, ttl: float,
                       deadline: float, base: CacheInfo) -> AcquireResult | AgentCtxError:
        if view.size_bytes > self.settings.max_prefix_bytes:
            return self._failure(BypassReason.CAPACITY, base)
        state = self._scopes.get(sfp)
        match = self._match(state, view, ttl) if state else None
        floor = max(provider.min_cache_tokens(scope.model), self._floors.get((scope.provider, scope.model), 0))
        decision = policy.decide(
            empty=view.prefix.is_empty,
            tokens=view.tokens,
            history_len=view.history_len,
            floor=floor,
            match=policy.CachedPrefix(match.tokens, match.history_len, match.uses) if match else None,
            agreeing_sightings=self._agreeing(sfp, view),
            settings=self.settings.policy,
        )
        if not view.prefix.is_empty:
            self._sight(sfp, view.history_len, view.digest)
        if decision.action is policy.Action.BYPASS:
            return _bypass(base, decision.reason)
        if decision.action is policy.Action.HIT:
            assert match is not None
            return self._issue(match, CacheState.HIT)
        state = self._scopes.setdefault(sfp, _ScopeState())
        key = (view.digest, ttl)
        flight = state.flights.get(key)
        if flight is None:
            if not self._reserve_slot():
                return self._issue(match, CacheState.HIT) if match else self._failure(BypassReason.CAPACITY, base)
            flight = _Flight(key, scope, sfp, view, ttl, replaces=match,
                             background=match is not None and self.settings.grow_in_background)
            state.flights[key] = flight
            self._flight_count += 1
            self._spawn(self._run_flight(flight))
        if match is not None and flight.background:
            return self._issue(match, CacheState.HIT)
        if _live_waiters(flight) >= self.settings.max_waiters:
            return self._issue(match, CacheState.HIT) if match else self._failure(BypassReason.CAPACITY, base)
        waiter = _Waiter(deadline, asyncio.get_running_loop().create_future())
        flight.waiters.append(waiter)
        return await self._wait(waiter, base)

    async def _wait(self, waiter: _Waiter, base: CacheInfo) -> AcquireResult | AgentCtxError:
        try:
            async with asyncio.timeout(max(0.0, waiter.deadline - self.clock.monotonic())):
                return await asyncio.shield(waiter.future)
        except TimeoutError:
            waiter.gone = True
            if waiter.future.done():
                return waiter.future.result()
            return self._failure(BypassReason.DEADLINE_EXCEEDED, base)
        except asyncio.CancelledError:
            waiter.gone = True
            raise

    # --- the create ---------------------------------------------------------------

    async def _run_flight(self, flight: _Flight) -> None:
        provider = self.providers[flight.scope.provider]
        entry_id = secrets.token_hex(8)
        display_name = f"agentctx-{entry_id}"
        prefix = flight.view.prefix
        spec = CacheSpec(prefix.model, prefix.system_instruction, prefix.tools, prefix.tool_config, prefix.history,
                         flight.ttl_s, display_name)
        attrs = {"cache.provider": provider.name, "cache.prefix_tokens": flight.view.tokens,
                 "cache.grow": flight.replaces is not None}
        with _tracer.start_as_current_span("cache.create", attributes=attrs) as span:
            try:
                await self.journal.intent(entry_id, provider.name, display_name, self.clock.wall() + flight.ttl_s)
            except OSError as exc:
                log.error("journal write failed; create skipped", extra={"error_type": type(exc).__name__})
                span.set_attribute("cache.outcome", "journal_failed")
                self._fail_flight(flight, BypassReason.CREATE_FAILED)
                return
            try:
                async with asyncio.timeout(self.settings.create_timeout_s):
                    handle = await provider.create_cache(spec)
            except (Exception, asyncio.CancelledError) as exc:
                reason, retry_after, definite = self._classify_create_failure(exc, flight)
                span.set_attribute("cache.outcome", reason.value)
                _creates.add(1, {"provider": provider.name, "outcome": reason.value})
                log.info("cache create failed", extra={"entry": entry_id, "reason": reason.value,
                                                        "error_type": type(exc).__name__})
                if definite:
                    # The provider refused: nothing was created.
                    await self._quietly(self.journal.deleted(entry_id))
                self._fail_flight(flight, reason, retry_after)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            span.set_attribute("cache.outcome", "created")
            _creates.add(1, {"provider": provider.name, "outcome": "created"})
            try:
                await self.journal.created(entry_id, handle.name, handle.expire_time)
            except OSError as exc:
                # Never keep a cache the journal cannot name after a crash.
                log.error("journal write failed; new cache deleted", extra={"error_type": type(exc).__name__})
                self.janitor.delete(flight.scope.provider, entry_id, handle.name, "unjournaled")
                self._fail_flight(flight, BypassReason.CREATE_FAILED)
                return
            if self.after_create_result is not None:
                await self.after_create_result()
            self._install(flight, entry_id, handle)

    def _classify_create_failure(self, exc: BaseException, flight: _Flight) -> tuple[BypassReason, float | None, bool]:
        """(bypass reason, retry hint, whether the provider surely created nothing)."""
        if isinstance(exc, CacheTooSmall):
            key = (flight.scope.provider, flight.scope.model)
            learned = exc.min_tokens or flight.view.tokens + 1
            self._floors[key] = max(self._floors.get(key, 0), learned)
            return BypassReason.BELOW_MIN_TOKENS, None, True
        if isinstance(exc, RateLimited):
            return BypassReason.RATE_LIMITED, exc.retry_after, True
        if isinstance(exc, (InvalidRequest, ProviderPermissionDenied, ContextWindowExceeded)):
            return BypassReason.CREATE_FAILED, None, True
        if isinstance(exc, ProviderUnavailable):
            return BypassReason.UNAVAILABLE, exc.retry_after, False
        if isinstance(exc, (TimeoutError, ProviderTimeout)):
            return BypassReason.DEADLINE_EXCEEDED, None, False
        if not isinstance(exc, (ProviderError, asyncio.CancelledError)):
            log.error("unexpected create failure", extra={"error_type": type(exc).__name__})
        return BypassReason.CREATE_FAILED, None, False

    def _install(self, flight: _Flight, entry_id: str, handle: CacheHandle) -> None:
        """Synchronous from the deadline check to the last lease, so no waiter
        can slip past its deadline in between."""
        now = self.clock.monotonic()
        base = self._flight_info(flight)
        live: list[_Waiter] = []
        for waiter in flight.waiters:
            if waiter.gone or waiter.future.done():
                continue
            if waiter.deadline <= now:
                waiter.gone = True
                waiter.future.set_result(self._failure(BypassReason.DEADLINE_EXCEEDED, base))
                continue
            live.append(waiter)
        self._end_flight(flight)
        if flight.cancelled or not (live or flight.background):
            self.orphans_deleted += 1
            log.info("orphan cache deleted", extra={"entry": entry_id, "invalidated": flight.cancelled})
            self.janitor.delete(flight.scope.provider, entry_id, handle.name, "orphan")
            return
        view = flight.view
        entry = Entry(
            id=entry_id, generation=next(self._generations), scope=flight.scope, scope_fp=flight.scope_fp,
            ttl_s=flight.ttl_s, prefix_fp=view.fingerprint, history_len=view.history_len, digest=view.digest,
            tokens=handle.tokens or view.tokens, size_bytes=view.size_bytes, handle=handle, last_used=now,
        )
        state = self._scopes.setdefault(flight.scope_fp, _ScopeState())
        state.entries[entry_id] = entry
        state.by_key[flight.key] = entry_id
        self._by_id[entry_id] = entry
        old = flight.replaces
        if old is not None and old.id in self._by_id and not old.retiring:
            self._retire(old)
        first = CacheState.GROWN if old is not None else CacheState.CREATED
        for i, waiter in enumerate(live):
            waiter.future.set_result(self._issue(entry, first if i == 0 else CacheState.HIT))
        log.info("cache created", extra={"entry": entry_id, "scope": flight.scope_fp[:16], "tokens": entry.tokens,
                                         "waiters": len(live), "grown": old is not None})

    def _fail_flight(self, flight: _Flight, reason: BypassReason, retry_after: float | None = None) -> None:
        self._end_flight(flight)
        base = self._flight_info(flight)
        old = flight.replaces
        for waiter in flight.waiters:
            if waiter.future.done():
                continue
            if old is not None and old.id in self._by_id and not old.retiring and self._usable(old):
                # A failed grow keeps serving the cache it meant to replace.
                waiter.future.set_result(self._issue(old, CacheState.HIT))
            elif reason is BypassReason.BELOW_MIN_TOKENS:
                waiter.future.set_result(_bypass(base, reason))
            else:
                waiter.future.set_result(self._failure(reason, base, retry_after))

    def _end_flight(self, flight: _Flight) -> None:
        state = self._scopes.get(flight.scope_fp)
        if state is not None and state.flights.get(flight.key) is flight:
            del state.flights[flight.key]
            self._flight_count -= 1
            self._forget_if_empty(flight.scope_fp)

    def _flight_info(self, flight: _Flight) -> CacheInfo:
        return CacheInfo(prefix_fingerprint=flight.view.fingerprint, prefix_tokens=flight.view.tokens,
                         scope_fingerprint=flight.scope_fp)

    # --- leases -------------------------------------------------------------------

    def _issue(self, entry: Entry, state: CacheState) -> AcquireResult:
        wall = self.clock.wall()
        expires = min(entry.handle.expire_time, wall + self.settings.lease_ttl_s)
        lease_id = self.signer.new_lease_id()
        entry.leases[lease_id] = expires
        entry.uses += 1
        entry.last_used = self.clock.monotonic()
        token = self.signer.sign(LeaseClaims(self.signer.boot, entry.id, entry.generation, entry.scope_fp, lease_id,
                                             expires, state.value))
        if state is CacheState.HIT:
            self._maybe_refresh(entry, wall)
        return AcquireResult(token, self.info(entry, state))

    def info(self, entry: Entry, state: CacheState) -> CacheInfo:
        return CacheInfo(state=state, prefix_fingerprint=entry.prefix_fp, prefix_tokens=entry.tokens,
                         expire_time=entry.handle.expire_time, scope_fingerprint=entry.scope_fp, uses=entry.uses)

    def resolve(self, token: str, scope_fp: str | None = None) -> tuple[Entry, LeaseClaims]:
        """The live entry a lease names. Raises LeaseRejected, or
        PermissionDenied for a genuine lease of another scope."""
        claims = self.signer.verify(token)
        if scope_fp is not None and claims.scope_fingerprint != scope_fp:
            raise PermissionDenied("the lease belongs to another scope", reason=Reason.LEASE_SCOPE_MISMATCH)
        entry = self._by_id.get(claims.entry_id)
        if entry is None or entry.generation != claims.generation:
            raise LeaseRejected(self._tombstones.get(claims.entry_id, "UNKNOWN"))
        if claims.lease_id not in entry.leases:
            raise LeaseRejected("UNKNOWN")
        if self.clock.wall() >= min(claims.expires_at, entry.handle.expire_time):
            raise LeaseRejected("EXPIRED")
        return entry, claims

    def release(self, token: str) -> bool:
        try:
            entry, claims = self.resolve(token)
        except (LeaseRejected, PermissionDenied):
            return False
        entry.leases.pop(claims.lease_id, None)
        if entry.retiring and not entry.leases:
            self._remove(entry, "EXPIRED", "replaced")
        return True

    # --- lifecycle ----------------------------------------------------------------

    def drop_missing(self, entry: Entry) -> None:
        """The provider no longer holds the cache: forget it now, so the next
        acquire creates a new one, and delete whatever may be left."""
        if self._by_id.get(entry.id) is not entry:
            return
        self._remove(entry, "INVALIDATED", "missing")
        self._sight(entry.scope_fp, entry.history_len, entry.digest)

    def invalidate(self, scope: Scope) -> tuple[int, int]:
        """Removes every entry and in-flight create of the scope; returns
        (entries removed, creates cancelled)."""
        sfp = scope.fingerprint
        state = self._scopes.get(sfp)
        for key in [k for k in self._sightings if k[0] == sfp]:
            del self._sightings[key]
        if state is None:
            return 0, 0
        entries = list(state.entries.values())
        flights = list(state.flights.values())
        for entry in entries:
            self._remove(entry, "INVALIDATED", "invalidated")
        base_infos = {id(f): self._flight_info(f) for f in flights}
        for flight in flights:
            flight.cancelled = True
            self._end_flight(flight)
            for waiter in flight.waiters:
                if not waiter.future.done():
                    waiter.future.set_result(self._failure(BypassReason.INVALIDATED, base_infos[id(flight)]))
        log.info("scope invalidated", extra={"scope": sfp[:16], "entries": len(entries), "inflight": len(flights)})
        return len(entries), len(flights)

    def sweep(self) -> None:
        """Drops expired leases, deletes expired caches and replaced caches
        that no lease needs any more."""
        wall = self.clock.wall()
        for entry in list(self._by_id.values()):
            for lease_id in [lid for lid, exp in entry.leases.items() if exp <= wall]:
                del entry.leases[lease_id]
            if entry.handle.expire_time <= wall:
                self._remove(entry, "EXPIRED", "expired")
                self._sight(entry.scope_fp, entry.history_len, entry.digest)
            elif entry.retiring and not entry.leases:
                self._remove(entry, "EXPIRED", "replaced")

    def _retire(self, entry: Entry) -> None:
        entry.retiring = True
        state = self._scopes.get(entry.scope_fp)
        if state is not None:
            key = (entry.digest, entry.ttl_s)
            if state.by_key.get(key) == entry.id:
                del state.by_key[key]
        wall = self.clock.wall()
        if not any(exp > wall for exp in entry.leases.values()):
            self._remove(entry, "EXPIRED", "replaced")

    def _remove(self, entry: Entry, invalid_reason: str, why: str) -> None:
        if self._by_id.pop(entry.id, None) is None:
            return
        state = self._scopes.get(entry.scope_fp)
        if state is not None:
            state.entries.pop(entry.id, None)
            key = (entry.digest, entry.ttl_s)
            if state.by_key.get(key) == entry.id:
                del state.by_key[key]
            self._forget_if_empty(entry.scope_fp)
        self._tombstones[entry.id] = invalid_reason
        while len(self._tombstones) > _TOMBSTONES:
            self._tombstones.popitem(last=False)
        self.janitor.delete(entry.provider, entry.id, entry.handle.name, why)

    def _forget_if_empty(self, sfp: str) -> None:
        state = self._scopes.get(sfp)
        if state is not None and not state.entries and not state.flights:
            del self._scopes[sfp]

    def _reserve_slot(self) -> bool:
        """Room for one more cache, evicting the least recently used idle one."""
        if len(self._by_id) + self._flight_count < self.settings.max_entries:
            return True
        wall = self.clock.wall()
        idle = [e for e in self._by_id.values() if not any(exp > wall for exp in e.leases.values())]
        if not idle:
            return False
        victim = min(idle, key=lambda e: (not e.retiring, e.last_used))
        log.info("cache evicted", extra={"entry": victim.id, "scope": victim.scope_fp[:16]})
        self._remove(victim, "INVALIDATED", "evicted")
        return True

    def _maybe_refresh(self, entry: Entry, wall: float) -> None:
        if not self.settings.refresh_on_hit or entry.refreshing:
            return
        if entry.handle.expire_time - wall > entry.ttl_s / 2:
            return
        entry.refreshing = True

        def done(handle: CacheHandle | None, gone: bool) -> None:
            entry.refreshing = False
            if gone:
                self.drop_missing(entry)
            elif handle is not None and self._by_id.get(entry.id) is entry:
                entry.handle = CacheHandle(entry.handle.name, handle.expire_time, entry.handle.tokens)

        self.janitor.refresh(entry.provider, entry.handle.name, entry.ttl_s, done)

    # --- matching and sightings ---------------------------------------------------

    def _usable(self, entry: Entry) -> bool:
        margin = min(self.settings.expiry_margin_s, entry.ttl_s / 10)
        return entry.handle.expire_time - margin > self.clock.wall()

    def _match(self, state: _ScopeState, view: PrefixView, ttl: float) -> Entry | None:
        """The live cache over the longest leading part of ``view``."""
        for n in range(view.history_len, -1, -1):
            entry_id = state.by_key.get((view.chain[n], ttl))
            if entry_id is None:
                continue
            entry = state.entries.get(entry_id)
            if entry is not None and not entry.retiring and self._usable(entry):
                return entry
        return None

    def _agreeing(self, sfp: str, view: PrefixView) -> int:
        return sum(self._sightings.get((sfp, n, view.chain[n]), 0) for n in range(view.history_len + 1))

    def _sight(self, sfp: str, history_len: int, digest: bytes) -> None:
        key = (sfp, history_len, digest)
        self._sightings[key] = self._sightings.pop(key, 0) + 1
        while len(self._sightings) > self.settings.max_sightings:
            self._sightings.popitem(last=False)

    # --- failures -----------------------------------------------------------------

    def _failure(self, reason: BypassReason, base: CacheInfo, retry_after: float | None = None) -> AcquireResult | AgentCtxError:
        if self.settings.failure_mode != "error":
            return _bypass(base, reason)
        cls, error_reason = _FAILURE_ERRORS[reason]
        hint = retry_after if retry_after is not None else (1.0 if cls in (Unavailable, ResourceExhausted) else None)
        return cls(f"prefix cache unavailable: {reason.value.lower().replace('_', ' ')}", reason=error_reason,
                   metadata={"prefix_tokens": base.prefix_tokens}, retry_after=hint)

    # --- tasks --------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Waits for in-flight creates to finish (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @staticmethod
    async def _quietly(coro: Awaitable[None]) -> None:
        try:
            await coro
        except OSError as exc:
            log.warning("journal write failed", extra={"error_type": type(exc).__name__})


def _bypass(base: CacheInfo, reason: BypassReason) -> AcquireResult:
    return AcquireResult("", CacheInfo(state=CacheState.BYPASS, bypass_reason=reason,
                                       prefix_fingerprint=base.prefix_fingerprint, prefix_tokens=base.prefix_tokens,
                                       scope_fingerprint=base.scope_fingerprint))


def _live_waiters(flight: _Flight) -> int:
    return sum(1 for w in flight.waiters if not w.gone and not w.future.done())
