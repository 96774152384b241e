"""Leases on entries: issue, resolve, release (see docs/ARCHITECTURE.md,
"Cache service"). The token format and its keys are domain.leases.

A lease lives until the earlier of ``lease_ttl_s`` and the cache's expiry.
It is recorded on its entry, so a replaced (retiring) entry is deleted only
when its last lease is released or expires, and eviction spares leased
entries. Resolving checks the signature, the scope, the generation (a lease
on a removed or re-created entry resolves to the removal's tombstone
reason) and the expiry.
"""

from __future__ import annotations

from agentctx_common.errors import PermissionDenied
from agentctx_common.reasons import Reason
from cache_service.domain.entry import Entry
from cache_service.domain.lifecycle import AddLease, HeldLease, Lifecycle
from cache_service.domain.model import AcquireResult, CacheState, LeaseClaims
from cache_service.domain.ports import Clock, HitLease, LeaseCodec, LeaseRejected, RegistryStore, TakenHit
from cache_service.domain.registry_settings import RegistrySettings


class LeaseIssuer:
    def __init__(self, store: RegistryStore, signer: LeaseCodec, clock: Clock, settings: RegistrySettings,
                 lifecycle: Lifecycle) -> None:
        self.signer = signer
        self._store = store
        self._clock = clock
        self._settings = settings
        self._lifecycle = lifecycle

    async def issue(self, entry: Entry, state: CacheState, add_lease: AddLease | None = None) -> AcquireResult:
        """``add_lease``: the store step that records the lease, when the
        caller's records more in it (Lifecycle.held); else the store's."""
        wall = self._clock.wall()
        expires = min(entry.handle.expire_time, wall + self._settings.lease_ttl_s)
        lease_id = self.signer.new_lease_id()
        # None only if a store shared by replicas lost the entry meanwhile:
        # the token then resolves to its tombstone.
        record = add_lease or self._store.add_lease
        leased = await record(entry.id, lease_id, expires, self._clock.monotonic()) or entry
        return self._signed(entry, leased, lease_id, expires, state, wall)

    def draw(self, held: HeldLease | None) -> HitLease:
        """The lease a hit would take now, for the acquire's first store
        step to take (RegistryStore.match_and_take_hit), with ``held``'s
        holder; as ``issue`` takes it."""
        wall = self._clock.wall()
        if held is None:
            return HitLease(self.signer.new_lease_id(), wall, wall + self._settings.lease_ttl_s,
                            self._clock.monotonic())
        return HitLease(self.signer.new_lease_id(), wall, wall + self._settings.lease_ttl_s, self._clock.monotonic(),
                        held.holder, held.wall, held.keep_s)

    def taken(self, taken: TakenHit, lease: HitLease) -> AcquireResult:
        """The HIT whose lease (``lease``, drawn by ``draw``) the store's
        step took, as ``issue`` returns it."""
        entry = taken.entry
        return self._signed(entry, entry, lease.lease_id, lease.expires(entry), CacheState.HIT, lease.wall)

    def _signed(self, entry: Entry, leased: Entry, lease_id: str, expires: float, state: CacheState,
                wall: float) -> AcquireResult:
        # Expiry as the token carries it (ms), so kept claims equal verified ones.
        claims = LeaseClaims(self.signer.boot, entry.id, entry.generation, entry.scope_fp, lease_id,
                             round(expires, 3), state.value)
        token = self.signer.sign(claims)
        if state is CacheState.HIT:
            self._lifecycle.maybe_refresh(leased, wall)
        return AcquireResult(token, leased.info(state), entry.id, claims)

    async def resolve(self, token: str, scope_fp: str | None = None, shared_fp: str = "") -> tuple[Entry, LeaseClaims]:
        """The live entry a lease names. Raises LeaseRejected, or
        PermissionDenied for a genuine lease of another scope than
        ``scope_fp`` or, when given, ``shared_fp`` (its app-wide scope)."""
        return await self.resolve_claims(self.signer.verify(token), scope_fp, shared_fp)

    async def resolve_claims(self, claims: LeaseClaims, scope_fp: str | None = None,
                             shared_fp: str = "") -> tuple[Entry, LeaseClaims]:
        """``resolve`` for a lease this process issued and kept (a call's
        own lease): its claims, genuine, so no token to verify again; the
        entry is checked as for any lease."""
        if scope_fp is not None and claims.scope_fingerprint != scope_fp and (
                not shared_fp or claims.scope_fingerprint != shared_fp):
            raise PermissionDenied("the lease belongs to another scope", reason=Reason.LEASE_SCOPE_MISMATCH)
        entry = await self._store.get(claims.entry_id)
        if entry is None or entry.generation != claims.generation:
            raise LeaseRejected(await self._store.tombstone(claims.entry_id) or "UNKNOWN")
        if claims.lease_id not in entry.leases:
            raise LeaseRejected("UNKNOWN")
        if self._clock.wall() >= min(claims.expires_at, entry.handle.expire_time):
            raise LeaseRejected("EXPIRED")
        return entry, claims

    async def release(self, token: str) -> bool:
        try:
            _, claims = await self.resolve(token)
        except (LeaseRejected, PermissionDenied):
            return False
        await self._drop(claims)
        return True

    async def release_issued(self, claims: LeaseClaims) -> None:
        """``release`` for a lease this process just issued and kept (a
        call's own lease): genuine, so dropped by its claims without
        verifying a token or reading the entry first (one store step)."""
        await self._drop(claims)

    async def _drop(self, claims: LeaseClaims) -> None:
        released = await self._store.drop_lease(claims.entry_id, claims.lease_id)
        if released is not None and released.retiring and not released.leases:
            await self._lifecycle.remove(released, "EXPIRED", "replaced")
