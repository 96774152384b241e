"""Provider creates: joining one, running it, installing its cache (see
docs/ARCHITECTURE.md, "Cache service").

A miss joins the key's flight or starts one (after reserving a slot). The
create is journaled (intent, then created) around the provider call, which
runs under ``create_timeout_s``. When it finishes:

- success: waiters past their deadline get DEADLINE_EXCEEDED; the cache is
  installed, a grown one retires the cache it replaces (unless that one
  holds the head alone: every conversation of the scope reads it), and each remaining
  waiter gets a lease (the first one CREATED or GROWN, the rest HIT). A
  cache nobody waits for any more, or created for a scope invalidated
  meanwhile, is deleted through the cleanup path instead of becoming an
  unreachable entry.
- failure: classified (domain.failures); a failed grow keeps serving the
  cache it meant to replace; a refusal for size teaches the floor (and
  a create that succeeds lowers a floor learned above its size).

With ``grow_in_background`` a grow's caller leases the cache it has and the
grow runs without waiters.

A shared registry that stops answering (RegistryUnavailable) fails the
create's waiters at once with REGISTRY_UNAVAILABLE (BYPASS, or the error
under ``failure_mode = "error"``) instead of leaving them to their
deadline; a cache created but not installed is deleted through the cleanup
path (its journal record, spilled to the local file if need be, covers a
crash meanwhile). Any other unexpected failure of the create task is
logged and fails its waiters with CREATE_FAILED.

A MARKED or AUTOMATIC provider has nothing to create: the entry is
installed at once, expiring at the provider's TTL for the prefix, and its
first leased call writes the prefix (domain.capabilities).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from opentelemetry import metrics, trace
from opentelemetry.util.types import AttributeValue

from cache_service.domain import capabilities, single_flight
from cache_service.domain.entry import Entry, new_entry_id
from cache_service.domain.failures import Outcome, bypass, classify_create_failure, failure
from cache_service.domain.flight import INSTALLED, Claim, Flight
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.lease_issuer import LeaseIssuer
from cache_service.domain.lifecycle import Lifecycle
from cache_service.domain.model import BypassReason, CacheHandle, CacheInfo, CacheSpec, CacheState
from cache_service.domain.ports import (
    Cleanup,
    Clock,
    Journal,
    Provider,
    RegistryStore,
    RegistryUnavailable,
    SingleFlight,
)
from cache_service.domain.registry_settings import RegistrySettings

log = logging.getLogger("agentctx.cache.registry")
_tracer = trace.get_tracer("agentctx.cache")
_meter = metrics.get_meter("agentctx.cache")
_creates = _meter.create_counter("agentctx.cache.creates", description="Provider cache creates by outcome.")


class Creator:
    def __init__(self, providers: Mapping[str, Provider], journal: Journal, cleanup: Cleanup, clock: Clock,
                 settings: RegistrySettings, store: RegistryStore, flights: SingleFlight, issuer: LeaseIssuer,
                 lifecycle: Lifecycle) -> None:
        self._providers = providers
        self._journal = journal
        self._cleanup = cleanup
        self._clock = clock
        self._settings = settings
        self._store = store
        self._flights = flights
        self._issuer = issuer
        self._lifecycle = lifecycle
        self._tasks: set[asyncio.Task[None]] = set()
        # Test seam: runs after a create's result arrived, before it is installed.
        self.after_create_result: Callable[[], Awaitable[None]] | None = None
        self.orphans_deleted = 0
        # Callers here waiting on another replica's create, by (scope, key): max_waiters holds for them too.
        self._remote_waiters: dict[tuple[str, tuple[bytes, float]], int] = {}

    def _failure(self, reason: BypassReason, base: CacheInfo, retry_after: float | None = None) -> Outcome:
        return failure(self._settings.failure_mode, reason, base, retry_after)

    # --- joining ------------------------------------------------------------------

    async def join(self, scope: Scope, view: PrefixView, ttl: float, match: Entry | None, deadline: float,
                   base: CacheInfo, reserve_slot: Callable[[], Awaitable[bool]]) -> Outcome:
        """Waits for the create of ``view`` (starting it if none runs), or
        serves ``match`` where the create cannot be waited for."""
        sfp = scope.fingerprint
        key = (view.digest, ttl)
        flight = self._flights.find(sfp, key)
        if flight is None:
            if not await reserve_slot():
                return await self._fallback(match, base)
            flight = Flight(key, scope, sfp, view, ttl, replaces=match,
                            background=match is not None and self._settings.grow_in_background)
            claim = await self._flights.begin(flight)
            if claim is Claim.FULL and await self._lifecycle.evict_one():
                claim = await self._flights.begin(flight)
            if claim is Claim.TAKEN:
                # Another caller of this process got there meanwhile, or another replica runs it.
                local = self._flights.find(sfp, key)
                if local is None:
                    return await self._join_remote(scope, view, ttl, match, deadline, base, reserve_slot)
                flight = local
            elif claim is Claim.FULL:
                return await self._fallback(match, base)
            else:
                try:
                    installed = await self._installed_meanwhile(flight)
                except RegistryUnavailable as exc:
                    await self._abandon(flight, BypassReason.REGISTRY_UNAVAILABLE, exc.retry_after)
                    raise
                if installed is not None:
                    return installed
                self._spawn(self._run_safely(flight))
        if match is not None and flight.background:
            return await self._issuer.issue(match, CacheState.HIT)
        if flight.live_waiters() >= self._settings.max_waiters:
            return await self._fallback(match, base)
        waiter = single_flight.join(flight, deadline)
        return await single_flight.wait(waiter, self._clock, lambda: self._failure(BypassReason.DEADLINE_EXCEEDED, base))

    async def _installed_meanwhile(self, flight: Flight) -> Outcome | None:
        """A store shared by replicas (or one that suspends) may have got the
        key's cache between this caller's match and its claim: then the claim
        is given back and the cache leased, never created twice."""
        existing = await self._store.first_match(flight.scope_fp, [flight.key], self._live)
        if existing is None:
            return None
        flight.outcome = INSTALLED
        await self._flights.end(flight)
        for waiter in flight.waiters:
            if waiter.live:
                waiter.future.set_result(await self._issuer.issue(existing, CacheState.HIT))
        return await self._issuer.issue(existing, CacheState.HIT)

    def _live(self, entry: Entry) -> bool:
        return not entry.retiring and self._lifecycle.usable(entry)

    async def _fallback(self, match: Entry | None, base: CacheInfo) -> Outcome:
        """No create to wait for: the cache we have, else CAPACITY."""
        return await self._issuer.issue(match, CacheState.HIT) if match else self._failure(BypassReason.CAPACITY, base)

    async def _join_remote(self, scope: Scope, view: PrefixView, ttl: float, match: Entry | None, deadline: float,
                           base: CacheInfo, reserve_slot: Callable[[], Awaitable[bool]]) -> Outcome:
        """Waits for the create another replica runs, then leases its cache;
        claims the create itself when that replica left no result (it died,
        or nobody there wanted the cache any more)."""
        sfp = scope.fingerprint
        key = (view.digest, ttl)
        waiting = self._remote_waiters.get((sfp, key), 0)
        if waiting >= self._settings.max_waiters:
            return await self._fallback(match, base)
        self._remote_waiters[(sfp, key)] = waiting + 1
        try:
            outcome = await self._flights.wait_remote(sfp, key, max(0.0, deadline - self._clock.monotonic()))
        finally:
            left = self._remote_waiters.pop((sfp, key)) - 1
            if left:
                self._remote_waiters[(sfp, key)] = left
        if outcome is None:
            if match is not None:
                return await self._issuer.issue(match, CacheState.HIT)
            return self._failure(BypassReason.DEADLINE_EXCEEDED, base)
        if outcome == INSTALLED:
            entry = await self._store.first_match(sfp, [key], self._live)
            if entry is not None:
                return await self._issuer.issue(entry, CacheState.HIT)
        elif outcome:
            reason = _reason(outcome)
            if match is not None and self._lifecycle.usable(match):
                return await self._issuer.issue(match, CacheState.HIT)
            return bypass(base, reason) if reason is BypassReason.BELOW_MIN_TOKENS else self._failure(reason, base)
        if self._clock.monotonic() >= deadline:
            return self._failure(BypassReason.DEADLINE_EXCEEDED, base)
        return await self.join(scope, view, ttl, match, deadline, base, reserve_slot)

    # --- the create -----------------------------------------------------------------

    async def _run_safely(self, flight: Flight) -> None:
        """The create task: whatever fails, its waiters are answered now."""
        try:
            await self._run(flight)
        except RegistryUnavailable as exc:
            await self._abandon(flight, BypassReason.REGISTRY_UNAVAILABLE, exc.retry_after)
        except Exception as exc:  # noqa: BLE001 - a create task must answer its waiters whatever happened
            log.error("create task failed", extra={"error_type": type(exc).__name__})
            await self._abandon(flight, BypassReason.CREATE_FAILED)

    async def _abandon(self, flight: Flight, reason: BypassReason, retry_after: float | None = None) -> None:
        """Ends the flight without touching the store and answers every
        waiter still waiting with ``reason``."""
        flight.outcome = reason.value
        with contextlib.suppress(RegistryUnavailable):
            await self._flights.end(flight)
        base = flight.info()
        single_flight.hand_over(flight, lambda: self._failure(reason, base, retry_after))

    async def _run(self, flight: Flight) -> None:
        provider = self._providers[flight.scope.provider]
        entry_id = new_entry_id(flight.scope_fp)
        display_name = f"agentctx-{entry_id}"
        prefix = flight.view.prefix
        spec = CacheSpec(prefix.model, prefix.system_instruction, prefix.tools, prefix.tool_config, prefix.history,
                         flight.ttl_s, display_name)
        attrs: dict[str, AttributeValue] = {"cache.provider": provider.name, "cache.prefix_tokens": flight.view.tokens,
                 "cache.grow": flight.replaces is not None}
        with _tracer.start_as_current_span("cache.create", attributes=attrs) as span:
            named = provider.named_caches
            if named is None:
                span.set_attribute("cache.outcome", "marked")
                _creates.add(1, {"provider": provider.name, "outcome": "marked"})
                await self._install(flight, entry_id, capabilities.prefix_handle(
                    entry_id, provider, flight.ttl_s, self._clock.wall(), flight.view.tokens))
                return
            try:
                await self._journal.intent(entry_id, provider.name, display_name, self._clock.wall() + flight.ttl_s)
            except OSError as exc:
                log.error("journal write failed; create skipped", extra={"error_type": type(exc).__name__})
                span.set_attribute("cache.outcome", "journal_failed")
                await self._fail(flight, BypassReason.CREATE_FAILED)
                return
            try:
                async with asyncio.timeout(self._settings.create_timeout_s):
                    handle = await named.create_cache(spec)
            except (Exception, asyncio.CancelledError) as exc:
                failed = classify_create_failure(exc, flight.view.tokens)
                span.set_attribute("cache.outcome", failed.reason.value)
                _creates.add(1, {"provider": provider.name, "outcome": failed.reason.value})
                log.info("cache create failed", extra={"entry": entry_id, "reason": failed.reason.value,
                                                        "error_type": type(exc).__name__})
                if failed.learned_floor is not None:
                    with contextlib.suppress(RegistryUnavailable):  # learned again at the next refusal
                        await self._store.learn_floor(flight.scope.provider, flight.scope.model,
                                                      failed.learned_floor, self._clock.wall(),
                                                      self._settings.learned_floor_keep_s)
                if failed.definite:
                    # The provider refused: nothing was created.
                    await _quietly(self._journal.deleted(entry_id))
                await self._fail(flight, failed.reason, failed.retry_after)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            span.set_attribute("cache.outcome", "created")
            _creates.add(1, {"provider": provider.name, "outcome": "created"})
            try:
                await self._journal.created(entry_id, handle.name, handle.expire_time)
            except OSError as exc:
                # Never keep a cache the journal cannot name after a crash.
                log.error("journal write failed; new cache deleted", extra={"error_type": type(exc).__name__})
                self._cleanup.delete(flight.scope.provider, entry_id, handle.name, "unjournaled")
                await self._fail(flight, BypassReason.CREATE_FAILED)
                return
            if self.after_create_result is not None:
                await self.after_create_result()
            await self._install(flight, entry_id, handle)
            # The provider cached this prefix: a floor learned above it was wrong (after the install, so
            # no waiter waits for it).
            with contextlib.suppress(RegistryUnavailable):
                await self._store.lower_floor(flight.scope.provider, flight.scope.model, flight.view.tokens,
                                              self._clock.wall())

    async def _install(self, flight: Flight, entry_id: str, handle: CacheHandle) -> None:
        """Waiters past their deadline at the moment the result is handled
        get DEADLINE_EXCEEDED; the flight ends once the entry is stored (so
        waiters on other replicas find it), and every caller that joined
        until then gets a lease."""
        now = self._clock.monotonic()
        base = flight.info()
        live = single_flight.split_late(flight, now, lambda: self._failure(BypassReason.DEADLINE_EXCEEDED, base))
        if flight.cancelled or not (live or flight.background):
            await self._flights.end(flight)
            self.orphans_deleted += 1
            log.info("orphan cache deleted", extra={"entry": entry_id, "invalidated": flight.cancelled})
            self._cleanup.delete(flight.scope.provider, entry_id, handle.name, "orphan")
            return
        view = flight.view
        try:
            entry = Entry(
                id=entry_id, generation=await self._store.next_generation(), scope=flight.scope,
                scope_fp=flight.scope_fp, ttl_s=flight.ttl_s, prefix_fp=view.fingerprint,
                history_len=view.history_len, digest=view.digest, tokens=handle.tokens or view.tokens,
                size_bytes=view.size_bytes, handle=handle, last_used=now,
            )
            await self._store.put(entry)
        except RegistryUnavailable:
            # Not installed: no registry entry will ever name it.
            if self._providers[flight.scope.provider].named_caches is not None:
                self._cleanup.delete(flight.scope.provider, entry_id, handle.name, "unregistered")
            raise
        old = await self._store.get(flight.replaces.id) if flight.replaces is not None else None
        # A cache of the head alone is the scope's, read by its every
        # conversation: it stays for its TTL. A conversation's is replaced.
        if old is not None and not old.retiring and old.history_len > 0:
            await self._lifecycle.retire(old)
        flight.outcome = INSTALLED
        state = CacheState.GROWN if flight.replaces is not None else CacheState.CREATED
        leased = 0
        try:
            # Leased before the flight ends: until then its slot counts toward
            # max_entries, after it the leases keep a claim that found the
            # tier FULL from evicting the new entry as idle. Callers joining
            # meanwhile are leased too; ``end`` takes the flight out of reach
            # before its first await.
            while waiting := [w for w in flight.waiters if w.live and not w.future.done()]:
                for waiter in waiting:
                    waiter.future.set_result(await self._issuer.issue(entry, state))
                    state, leased = CacheState.HIT, leased + 1
        finally:
            await self._flights.end(flight)
        log.info("cache created", extra={"entry": entry_id, "scope": flight.scope_fp[:16], "tokens": entry.tokens,
                                         "waiters": leased, "grown": flight.replaces is not None})

    async def _fail(self, flight: Flight, reason: BypassReason, retry_after: float | None = None) -> None:
        flight.outcome = reason.value
        await self._flights.end(flight)
        base = flight.info()
        replaces = flight.replaces
        for waiter in flight.waiters:
            if waiter.future.done():
                continue
            old = None
            if replaces is not None:
                with contextlib.suppress(RegistryUnavailable):
                    old = await self._store.get(replaces.id)
            if old is not None and not old.retiring and self._lifecycle.usable(old):
                # A failed grow keeps serving the cache it meant to replace.
                waiter.future.set_result(await self._issuer.issue(old, CacheState.HIT))
            elif reason is BypassReason.BELOW_MIN_TOKENS:
                waiter.future.set_result(bypass(base, reason))
            else:
                waiter.future.set_result(self._failure(reason, base, retry_after))

    # --- tasks ----------------------------------------------------------------------

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


def _reason(value: str) -> BypassReason:
    try:
        return BypassReason(value)
    except ValueError:
        return BypassReason.CREATE_FAILED


async def _quietly(coro: Awaitable[None]) -> None:
    try:
        await coro
    except OSError as exc:
        log.warning("journal write failed", extra={"error_type": type(exc).__name__})
