"""When a cache stops being served, and its deletion (see
docs/ARCHITECTURE.md, "Cache service").

A cache is deleted when it expires, is evicted, invalidated, found missing,
or replaced by a grown cache *and* no live lease still names it, or when
its conversation superseded it (below). A removed
entry leaves a tombstone (the reason its leases now resolve to) and its
provider cache goes to the bounded cleanup path; a failed provider call
never counts as a deletion. An expired or missing cache adds no evidence
of reuse: the requests that used it left their own sightings, with their
time (domain.policy). A hit on a cache past half its TTL extends it (``refresh_on_hit``).

Superseded caches: an acquire may name its holder (an opaque id of the
caller's conversation). The store remembers the entry each holder used
last, which holders used each entry and how many of its leases named one.
When a holder's new prefix does not extend the entry it used last
(compaction or a rewrite replaced its history), nothing of that
conversation will read the entry again: unless another holder used it
within its TTL, or a caller that named none ever leased it, it is
retired, so deleted as soon as no lease names it, and compaction does not
leave a trail of caches living out their TTL. A holder never retires a
cache of another scope (an app-wide head its app's users share).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from cache_service.domain.entry import Entry
from cache_service.domain.keys import PrefixView
from cache_service.domain.model import CacheHandle
from cache_service.domain.ports import Cleanup, Clock, RegistryStore
from cache_service.domain.registry_settings import RegistrySettings

log = logging.getLogger("agentctx.cache.registry")


class Lifecycle:
    def __init__(self, store: RegistryStore, cleanup: Cleanup, clock: Clock, settings: RegistrySettings) -> None:
        self._store = store
        self._cleanup = cleanup
        self._clock = clock
        self._settings = settings
        self._refreshing: set[str] = set()  # entry ids with a TTL refresh queued (this process's work)

    def usable(self, entry: Entry) -> bool:
        """Live for longer than the expiry margin."""
        margin = min(self._settings.expiry_margin_s, entry.ttl_s / 10)
        return entry.handle.expire_time - margin > self._clock.wall()

    async def remove(self, entry: Entry, invalid_reason: str, why: str) -> None:
        removed = await self._store.remove(entry.id, invalid_reason)
        if removed is None:
            return
        self._refreshing.discard(removed.id)
        self._cleanup.delete(removed.provider, removed.id, removed.handle.name, why)

    async def retire(self, entry: Entry, why: str = "replaced") -> None:
        """Replaced by a grown cache (or superseded): no new leases; deleted
        once no lease names it."""
        retired = await self._store.retire(entry.id)
        if retired is not None and not retired.leased_at(self._clock.wall()):
            await self.remove(retired, "EXPIRED", why)

    def held(self, scope_fp: str, holder: str) -> HeldLease:
        """A lease ``holder`` (named) is about to take in the scope, whose
        store step records its use too (``follow``'s swap)."""
        return HeldLease(self._store, scope_fp, holder, self._clock.wall(), self._settings.max_ttl_s)

    async def follow(self, scope_fp: str, holder: str, view: PrefixView, entry_id: str,
                     held: HeldLease | None = None) -> bool:
        """``holder`` acquired for ``view`` and got a lease on ``entry_id``
        ("" : a bypass). Retires the entry it used before if ``view``
        supersedes it and no other holder used it lately (deleted now, or
        when the holder's own last lease on it goes); True if it did.
        ``held``: the lease's own step recorded the use (a hit's)."""
        if not holder:
            # Its uses count against early deletion: leases that named no holder.
            return False
        wall = self._clock.wall()
        if held is not None and held.previous is not None:
            previous = held.previous
        else:
            previous = await self._store.swap_holder(scope_fp, holder, entry_id, wall, self._settings.max_ttl_s)
        if not previous or previous == entry_id:
            return False
        entry = await self._store.get(previous)
        if entry is None or entry.scope_fp != scope_fp or _extends(view, entry):
            # Another scope's: the app-wide head its users share (Registry.shared_scope).
            return False
        # A lease of another holder is a recent use of it, so a live lease
        # left here is this holder's own: the entry goes when that does.
        users = await self._store.holders(entry.id)
        if entry.uses > users.named_uses:
            return False  # a caller that named no holder leased it
        if any(h != holder and wall - used < entry.ttl_s for h, used in users.last_use.items()):
            return False
        await self.retire(entry, "superseded")
        return True

    async def drop_missing(self, entry: Entry) -> None:
        """The provider no longer holds the cache: forget it now, so the next
        acquire creates a new one, and delete whatever may be left."""
        current = await self._store.get(entry.id)
        if current is None or current.generation != entry.generation:
            return
        await self.remove(current, "INVALIDATED", "missing")

    async def remove_scope(self, scope_fp: str) -> list[Entry]:
        """Forgets the scope's sightings and removes its entries."""
        await self._store.forget_sightings(scope_fp)
        entries = await self._store.scope_entries(scope_fp)
        for entry in entries:
            await self.remove(entry, "INVALIDATED", "invalidated")
        return entries

    async def sweep(self) -> None:
        """Drops expired leases, deletes expired caches and replaced caches
        that no lease needs any more."""
        wall = self._clock.wall()
        for listed in await self._store.all_entries():
            entry = await self._store.drop_expired_leases(listed.id, wall)
            if entry is None:
                continue
            if entry.handle.expire_time <= wall:
                await self.remove(entry, "EXPIRED", "expired")
            elif entry.retiring and not entry.leases:
                await self.remove(entry, "EXPIRED", "replaced")

    async def evict_one(self) -> bool:
        """Deletes the least recently used cache no lease names, if any."""
        victim = await self._store.least_recently_used_idle(self._clock.wall())
        if victim is None:
            return False
        log.info("cache evicted", extra={"entry": victim.id, "scope": victim.scope_fp[:16]})
        await self.remove(victim, "INVALIDATED", "evicted")
        return True

    def maybe_refresh(self, entry: Entry, wall: float) -> None:
        if not self._settings.refresh_on_hit or entry.id in self._refreshing:
            return
        if entry.handle.expire_time - wall > entry.ttl_s / 2:
            return
        self._refreshing.add(entry.id)

        async def done(handle: CacheHandle | None, gone: bool) -> None:
            self._refreshing.discard(entry.id)
            if gone:
                await self.drop_missing(entry)
                return
            current = await self._store.get(entry.id) if handle is not None else None
            if handle is not None and current is not None and current.generation == entry.generation:
                await self._store.set_expiry(entry.id, handle.expire_time)

        self._cleanup.refresh(entry.provider, entry.handle.name, entry.ttl_s, done)


AddLease = Callable[[str, str, float, float], Awaitable[Entry | None]]  # RegistryStore.add_lease


class HeldLease:
    """A lease taken for a named holder in one store step with the holder's
    use (``RegistryStore.lease_and_swap_holder``): ``add_lease`` is the step
    LeaseIssuer.issue runs, and keeps the entry the holder used before
    (``previous``, None until it ran) for ``Lifecycle.follow``."""

    __slots__ = ("_scope_fp", "_store", "holder", "keep_s", "previous", "wall")

    def __init__(self, store: RegistryStore, scope_fp: str, holder: str, wall: float, keep_s: float) -> None:
        self._store = store
        self._scope_fp = scope_fp
        self.holder = holder
        self.wall = wall
        self.keep_s = keep_s
        self.previous: str | None = None

    async def add_lease(self, entry_id: str, lease_id: str, expires: float, now: float) -> Entry | None:
        leased, self.previous = await self._store.lease_and_swap_holder(
            entry_id, lease_id, expires, now, self._scope_fp, self.holder, self.wall, self.keep_s)
        return leased


def _extends(view: PrefixView, entry: Entry) -> bool:
    """Whether ``view`` starts with the entry's prefix (so the entry may still serve it)."""
    n = entry.history_len
    return n < len(view.chain) and view.chain[n] == entry.digest
