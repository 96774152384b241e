"""The lease registry: provider caches by scope and prefix, behind leases
(see docs/ARCHITECTURE.md, "Cache service").

An entry is one provider cache, keyed by scope (provider, app, user, model,
policy), prefix (its chain digest) and TTL. ``acquire`` applies the create
policy and returns a signed lease or a bypass. This facade wires the parts
and is all the servicer and the generator use:

- domain.admission: checks, matching, the policy decision, slots;
- domain.creates and domain.single_flight: one create per key, deadlined
  waiters, installing the result;
- domain.lease_issuer: issue, resolve, release;
- domain.lifecycle: retire, remove, sweep, invalidate, refresh, evict;
- domain.failures: what a failure becomes under ``failure_mode``;
- the state behind ports.RegistryStore and ports.SingleFlight.

Bounds: ``max_entries`` live caches (in-flight creates reserve a slot),
``max_prefix_bytes``, ``max_scope_bytes``, ``max_waiters`` per key, create
deadline, default and max TTL. ``failure_mode``: "bypass" turns cache
failures (create refused or failed, rate limits, capacity, deadlines,
invalidation) into BYPASS results; "error" raises them. Policy bypasses
(first sighting, small or empty prefix) are never errors. A shared store
that cannot answer (RegistryUnavailable) makes the acquire BYPASS
REGISTRY_UNAVAILABLE, or raises it (UNAVAILABLE with RetryInfo) under
"error": the turn never waits on a dead Redis for more than one step's
deadline, nor fails INTERNAL.

Shared heads (``shared_head_apps``, NAMED providers and the agentctx
policy only; off by default):
the users of an opted-in app share the caches of a head alone
(``shared_scope``: the scope with user ""). A request whose prefix is a
head alone is acquired wholly in that scope (its sightings, loss account,
single flight and entries), naming no holder; a conversation's request
is acquired in its user's scope, where the app-wide head cache is its
match only when the user's scope has none. A lease on a shared cache is
good for any user of the app; a user's holder never retires it
(``Lifecycle.follow``); invalidating a user's scope drops the app-wide
head caches too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial

from opentelemetry import metrics, trace

from agentctx_common.errors import AgentCtxError
from cache_service.domain import capabilities, policy, single_flight
from cache_service.domain.admission import Admission
from cache_service.domain.creates import Creator
from cache_service.domain.entry import Entry
from cache_service.domain.failures import Outcome, bypass, failure
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.lease_issuer import LeaseIssuer
from cache_service.domain.leases import LeaseSigner
from cache_service.domain.lifecycle import HeldLease, Lifecycle
from cache_service.domain.memory_store import MemoryRegistryStore
from cache_service.domain.model import AcquireResult, BypassReason, CacheInfo, CacheState, ScopeStatus
from cache_service.domain.ports import (
    CacheKind,
    Cleanup,
    Clock,
    Journal,
    LeaseCodec,
    Provider,
    RegistryStore,
    RegistryUnavailable,
    SingleFlight,
)
from cache_service.domain.registry_settings import RegistrySettings

log = logging.getLogger("agentctx.cache.registry")
_tracer = trace.get_tracer("agentctx.cache")
_meter = metrics.get_meter("agentctx.cache")
_acquires = _meter.create_counter("agentctx.cache.acquires", description="AcquireLease outcomes.")


class Registry:
    def __init__(
        self,
        providers: Mapping[str, Provider],
        journal: Journal,
        cleanup: Cleanup,
        clock: Clock,
        settings: RegistrySettings = RegistrySettings(),
        signer: LeaseCodec | None = None,
        *,
        store: RegistryStore | None = None,
        flights: SingleFlight | None = None,
    ) -> None:
        self.clock = clock
        self.settings = settings
        self.store: RegistryStore = store or MemoryRegistryStore(max_sightings=settings.max_sightings)
        self.flights: SingleFlight = flights or single_flight.LocalSingleFlight()
        self.lifecycle = Lifecycle(self.store, cleanup, clock, settings)
        self.leases = LeaseIssuer(self.store, signer or LeaseSigner(), clock, settings, self.lifecycle)
        self.admission = Admission(providers, self.store, self.flights, self.lifecycle, settings, clock)
        self.creates = Creator(providers, journal, cleanup, clock, settings, self.store, self.flights, self.leases,
                               self.lifecycle)
        # Bound, not wrapped: these run on every lease and generate call.
        # resolve(token, scope_fp=None, shared_fp="") -> (entry, claims) raises LeaseRejected,
        # or PermissionDenied for a genuine lease of another scope (than either).
        self.resolve = self.leases.resolve
        self.resolve_claims = self.leases.resolve_claims
        self.release = self.leases.release
        self.release_issued = self.leases.release_issued
        self.drop_missing = self.lifecycle.drop_missing
        self.sweep = self.lifecycle.sweep
        self.flights.on_invalidated(self._cancel_remote)

    # --- queries ------------------------------------------------------------------

    @property
    def signer(self) -> LeaseCodec:
        return self.leases.signer

    def provider(self, name: str) -> Provider:
        return self.admission.provider(name)

    def check_scope(self, scope: Scope) -> None:
        self.admission.check_scope(scope)

    def normalize_ttl(self, ttl_s: float | None) -> float:
        return self.admission.normalize_ttl(ttl_s)

    def shared_scope(self, scope: Scope) -> Scope | None:
        """The app-wide scope whose head-only caches the users of
        ``scope``'s app share, when the app opted in (``shared_head_apps``)
        and its provider keeps NAMED caches, under the agentctx policy (the
        adk variant reproduces a client that shares nothing); else None."""
        if (scope.app not in self.settings.shared_head_apps or not scope.user
                or self.settings.policy.variant != policy.AGENTCTX):
            return None
        provider = self.admission.providers.get(scope.provider)
        if provider is None or provider.cache_kind is not CacheKind.NAMED:
            return None
        return Scope(scope.provider, scope.app, "", scope.model, scope.policy)

    def shared_fingerprint(self, scope: Scope) -> str:
        """``shared_scope``'s fingerprint, "" when there is none: a lease of
        that scope serves a call of ``scope`` too."""
        shared = self.shared_scope(scope)
        return shared.fingerprint if shared is not None else ""

    def info(self, entry: Entry, state: CacheState) -> CacheInfo:
        return entry.info(state)

    async def status(self, scope: Scope) -> ScopeStatus:
        fp = scope.fingerprint
        entries = await self.store.scope_entries(fp)
        flights = self.flights.in_scope(fp)
        return ScopeStatus(
            fp,
            entry_count=len(entries),
            inflight_count=len(flights),
            waiter_count=sum(f.live_waiters() for f in flights),
            prefix_bytes=sum(e.size_bytes for e in entries),
        )

    async def entry_count(self) -> int:
        return await self.store.count()

    async def entries(self) -> list[Entry]:
        return await self.store.all_entries()

    @property
    def orphans_deleted(self) -> int:
        return self.creates.orphans_deleted

    @property
    def after_create_result(self) -> Callable[[], Awaitable[None]] | None:
        """Test seam: runs after a create's result arrived, before it is installed."""
        return self.creates.after_create_result

    @after_create_result.setter
    def after_create_result(self, hook: Callable[[], Awaitable[None]] | None) -> None:
        self.creates.after_create_result = hook

    # --- acquire ------------------------------------------------------------------

    async def acquire(self, scope: Scope, view: PrefixView, ttl_s: float | None, deadline: float | None,
                      holder: str = "", request_tokens: int = 0) -> AcquireResult:
        """A lease on a cache for ``view`` in ``scope``, or a bypass.
        ``deadline`` is absolute, on the registry clock's monotonic reading.
        ``holder``: the caller's conversation, whose superseded cache goes
        (``Lifecycle.follow``). ``request_tokens``: the whole request's
        size, when the caller knows it (what a MARKED create writes through)."""
        self.check_scope(scope)
        provider = self.provider(scope.provider)
        shared = self.shared_scope(scope)
        if shared is not None and not view.history_len:
            # A head alone: the app's users share it (no holder: a user's conversation says nothing of the others').
            scope, holder, shared = shared, "", None
        ttls = self.admission.ttl_options(provider, ttl_s)
        sfp = scope.fingerprint
        base = CacheInfo(prefix_fingerprint=view.fingerprint, prefix_tokens=view.tokens, scope_fingerprint=sfp)
        now = self.clock.monotonic()
        limit = now + self.settings.create_timeout_s + 1.0
        deadline = limit if deadline is None else min(deadline, limit)
        with _tracer.start_as_current_span("cache.acquire", attributes={
            "cache.provider": scope.provider, "cache.prefix_tokens": view.tokens,
            "cache.prefix_bytes": view.size_bytes, "cache.scope_fingerprint": sfp[:16],
        }) as span:
            # A hit's lease records the holder's use in its own store step.
            held = self.lifecycle.held(sfp, holder) if holder else None
            try:
                outcome = await self._acquire(scope, provider, view, ttls, deadline, base, request_tokens, held,
                                              shared.fingerprint if shared is not None else "")
            except RegistryUnavailable as exc:
                outcome = exc if self.settings.failure_mode == "error" else bypass(
                    base, BypassReason.REGISTRY_UNAVAILABLE)
            info = outcome.info if isinstance(outcome, AcquireResult) else None
            state = info.state.value if info else "ERROR"
            reason = info.bypass_reason.value if info else str(getattr(outcome, "reason", ""))
            span.set_attribute("cache.state", state)
            span.set_attribute("cache.bypass_reason", reason)
            _acquires.add(1, {"provider": scope.provider, "state": state, "reason": reason})
        if isinstance(outcome, AgentCtxError):
            raise outcome
        with contextlib.suppress(RegistryUnavailable):  # holders are followed again at their next acquire
            await self.lifecycle.follow(sfp, holder, view, outcome.entry_id, held)
        return outcome

    async def _acquire(self, scope: Scope, provider: Provider, view: PrefixView, ttls: tuple[float, ...],
                       deadline: float, base: CacheInfo, request_tokens: int = 0,
                       held: HeldLease | None = None, shared_fp: str = "") -> Outcome:
        if self.admission.too_large(view):
            return failure(self.settings.failure_mode, BypassReason.CAPACITY, base)
        # A warm hit is one store step: the lease drawn here is taken by the
        # first one when the policy serves its match as it is.
        lease = self.leases.draw(held)
        decision, match, taken = await self.admission.decide(scope, provider, view, ttls, request_tokens, lease,
                                                             shared_fp)
        if taken is not None:
            if held is not None:
                held.previous = taken.previous
            return self.leases.taken(taken, lease)
        if decision.action is policy.Action.BYPASS:
            return bypass(base, decision.reason)
        if decision.action is policy.Action.HIT:
            assert match is not None
            # Rule 8: a scope in deficit writes no head below the floor through.
            if capabilities.head_below_floor(provider, match) and await self.admission.balance(scope.fingerprint) < 0:
                return bypass(base, BypassReason.FIRST_SIGHTING)
            return await self.leases.issue(match, CacheState.HIT, held.add_lease if held else None)
        return await self.creates.join(scope, view, decision.ttl_s, match, deadline, base,
                                       self.admission.reserve_slot)

    # --- lifecycle ----------------------------------------------------------------

    async def invalidate(self, scope: Scope) -> tuple[int, int]:
        """Removes every entry and in-flight create of the scope (other
        replicas cancel theirs), and of its app-wide scope when the app
        shares heads (a head may hold the user's own templated
        instruction: it goes too, and the app's next call creates it
        again); returns (entries removed, creates cancelled here)."""
        removed = cancelled = 0
        shared = self.shared_scope(scope)
        for sfp in (scope.fingerprint, *((shared.fingerprint,) if shared is not None else ())):
            entries = await self.lifecycle.remove_scope(sfp)
            stopped = await self._cancel_flights(sfp)
            await self.flights.invalidated(sfp)
            if entries or stopped:
                log.info("scope invalidated", extra={"scope": sfp[:16], "entries": len(entries), "inflight": stopped})
            removed, cancelled = removed + len(entries), cancelled + stopped
        return removed, cancelled

    async def _cancel_remote(self, sfp: str) -> None:
        await self._cancel_flights(sfp)

    async def _cancel_flights(self, sfp: str) -> int:
        flights = self.flights.in_scope(sfp)
        for flight in flights:
            flight.cancelled = True
            flight.outcome = BypassReason.INVALIDATED.value
            await self.flights.end(flight)
            single_flight.hand_over(flight, partial(failure, self.settings.failure_mode, BypassReason.INVALIDATED,
                                                    flight.info()))
        return len(flights)

    # --- tasks --------------------------------------------------------------------

    async def idle(self) -> None:
        """Waits for in-flight creates to finish (tests and shutdown)."""
        await self.creates.idle()

    async def close(self) -> None:
        await self.creates.close()
