"""The in-process RegistryStore (domain.ports): the registry's state in
dicts, for one cache-service process (see docs/ARCHITECTURE.md, "Cache
service").

- Entries by id (insertion order: oldest first) and, per scope, by key.
- Tombstones: the invalid reason of the last ``max_tombstones`` removed
  entries, so a lease on one resolves to INVALIDATED or EXPIRED rather than
  UNKNOWN.
- Sightings: (scope, history length, chain digest) -> when last seen, for
  each request's prefix and its head, the most recently seen
  ``max_sightings`` kept; per scope the previous request's prefix, the
  last ``GAPS_KEPT`` arrival gaps, and its first sightings: those pending
  and the outcomes of the last ``GAPS_KEPT`` resolved (seconds until a
  request agreed with one, or ``MISS`` past the horizon; a first sighting
  met with ``GAPS_KEPT`` pending is not tracked); the last
  ``SERVER_FIRSTS_KEPT`` outcomes over each app's scopes (the most recent
  ``GROUPS_KEPT`` apps) and over all scopes (domain.policy.Evidence).
- Learned floors: (provider, model) -> the smallest prefix a provider
  caches, as its refusals and uncached breakpoints taught us, and until
  when (wall) the floor is kept; a cached prefix below it lowers it.
- Reported creates: the NAMED entries whose create a call's usage has
  reported (dropped with the entry).
- Loss accounts (domain.policy, rule 8): a ``policy.Ledger`` of at most
  ``max_accounts`` scopes, each forgotten ``keep_s`` after its last
  booking.
- Holders: (scope, holder) -> the entry it used last, the most recent
  ``max_holders`` kept; per entry, its ``MAX_ENTRY_HOLDERS`` latest named
  holders, when each used it and how many leases named one (dropped with
  the entry).

No method suspends, so each registry step that calls several of them stays
atomic on the event loop. Entries handed out are the stored objects
themselves; callers still change them only through these methods.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.policy import MISS, Booking, Evidence, Ledger
from cache_service.domain.ports import EntryHolders, HitTerms, LossCredit, TakenHit

GAPS_KEPT = 16  # arrival gaps (and first-sighting outcomes, pending ones) kept per scope
SERVER_FIRSTS_KEPT = 64  # first-sighting outcomes kept over all scopes, and over each app's
GROUPS_KEPT = 1024  # apps whose outcomes are kept
# Enough to tell "only this conversation" from "shared": the oldest holder
# dropped is older than every one kept, so an entry whose kept holders but
# one are stale has no recent other holder either.
MAX_ENTRY_HOLDERS = 8


@dataclass
class _ScopeEntries:
    entries: dict[str, Entry] = field(default_factory=dict)
    by_key: dict[EntryKey, str] = field(default_factory=dict)


@dataclass
class _ScopeSightings:
    """A scope's recent arrivals (domain.policy.Evidence), ``GAPS_KEPT`` of each."""

    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    head_gaps: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    continued: deque[bool] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    with_history: int = 0  # of ``continued``, how many are True
    previous: tuple[int, bytes] | None = None  # the previous request's (history length, digest)
    records: int = 0  # of the scope's sightings still kept
    # First sightings not resolved yet: (history length, digest) -> when seen.
    pending: OrderedDict[tuple[int, bytes], float] = field(default_factory=OrderedDict)
    firsts: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))

    def note(self, has_history: bool, agreeing: float | None, head: float | None) -> None:
        if len(self.continued) == GAPS_KEPT:
            self.with_history -= self.continued[0]
        self.continued.append(has_history)
        self.with_history += has_history
        if has_history and agreeing is not None:
            self.gaps.append(agreeing)
        if head is not None:
            self.head_gaps.append(head)

    def resolve(self, chain: Sequence[bytes], now: float, horizon_s: float) -> list[float]:
        """Outcomes of the pending first sightings this request agrees with
        (seconds since each) or that passed the horizon (``MISS``)."""
        done: list[tuple[tuple[int, bytes], float]] = []
        for (n, digest), seen in self.pending.items():
            if now - seen >= horizon_s:
                done.append(((n, digest), MISS))
            elif n < len(chain) and chain[n] == digest:
                done.append(((n, digest), max(0.0, now - seen)))
        for key, _ in done:
            del self.pending[key]
        outcomes = [outcome for _, outcome in done]
        self.firsts.extend(outcomes)
        return outcomes

    def first_seen(self, key: tuple[int, bytes], now: float) -> None:
        """A first sighting, pending until agreed with. With ``GAPS_KEPT``
        pending already, it is not tracked: the pending ones are a sample,
        kept until each is resolved, so a wave of starts faster than their
        followers still yields outcomes (dropping the oldest instead dropped
        every one before its follower came)."""
        if key in self.pending or len(self.pending) < GAPS_KEPT:
            self.pending.pop(key, None)
            self.pending[key] = now

    def evidence(self, agreeing: float | None, previous_agrees: bool, server: tuple[float, ...],
                 now: float) -> Evidence:
        share = self.with_history / len(self.continued) if self.continued else 0.0
        pending = tuple(max(0.0, now - seen) for seen in self.pending.values())
        return Evidence(agreeing, tuple(self.gaps), previous_agrees, tuple(self.head_gaps), share,
                        tuple(self.firsts), pending, server)


class MemoryRegistryStore:
    def __init__(self, *, max_sightings: int = 4096, max_tombstones: int = 4096, max_holders: int = 16384,
                 max_accounts: int = 65536) -> None:
        self._max_sightings = max_sightings
        self._max_tombstones = max_tombstones
        self._max_holders = max_holders
        self._holder_entry: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._entry_holders: dict[str, OrderedDict[str, float]] = {}
        self._named_uses: dict[str, int] = {}
        self._by_id: dict[str, Entry] = {}
        self._scopes: dict[str, _ScopeEntries] = {}
        self._tombstones: OrderedDict[str, str] = OrderedDict()  # entry id -> invalid reason
        # (scope, history length, chain digest) -> wall time last seen, oldest first.
        self._sightings: OrderedDict[tuple[str, int, bytes], float] = OrderedDict()
        self._sighting_scopes: dict[str, _ScopeSightings] = {}
        self._server_firsts: deque[float] = deque(maxlen=SERVER_FIRSTS_KEPT)
        self._group_firsts: OrderedDict[str, deque[float]] = OrderedDict()
        self._floors: dict[tuple[str, str], tuple[int, float]] = {}  # (provider, model) -> (floor, kept until)
        self._reported: set[str] = set()
        self._generations = itertools.count(1)
        self._ledger = Ledger(0.0, 0.0, max_scopes=max_accounts)

    # --- entries --------------------------------------------------------------------

    async def get(self, entry_id: str) -> Entry | None:
        return self._by_id.get(entry_id)

    async def first_match(self, scope_fp: str, keys: Sequence[EntryKey],
                          usable: Callable[[Entry], bool]) -> Entry | None:
        state = self._scopes.get(scope_fp)
        if state is None:
            return None
        for key in keys:
            entry_id = state.by_key.get(key)
            entry = state.entries.get(entry_id) if entry_id is not None else None
            if entry is not None and usable(entry):
                return entry
        return None

    async def match_and_record_sighting(self, scope_fp: str, keys: Sequence[EntryKey],
                                        usable: Callable[[Entry], bool], chain: Sequence[bytes], now: float,
                                        horizon_s: float, group: str = "",
                                        credit: LossCredit | None = None) -> tuple[Entry | None, Evidence, float | None]:
        # None suspends: one step on the event loop.
        match = await self.first_match(scope_fp, keys, usable)
        evidence = await self.record_sighting(scope_fp, chain, now, horizon_s, group)
        balance = None if credit is None else await self.book_loss(scope_fp, credit.booking, credit.opening,
                                                                   credit.keep_s)
        return match, evidence, balance

    async def match_and_take_hit(self, scope_fp: str, keys: Sequence[EntryKey], usable: Callable[[Entry], bool],
                                 chain: Sequence[bytes], now: float, horizon_s: float, group: str, credit: LossCredit,
                                 hit: HitTerms) -> tuple[Entry | None, Evidence, float, TakenHit | None]:
        # None suspends: one step on the event loop.
        match, evidence, balance = await self.match_and_record_sighting(scope_fp, keys, usable, chain, now,
                                                                         horizon_s, group, credit)
        assert balance is not None
        if match is None or not hit.takes(match, balance):
            return match, evidence, balance, None
        lease = hit.lease
        expires = lease.expires(match)
        if lease.holder:
            leased, previous = await self.lease_and_swap_holder(match.id, lease.lease_id, expires, lease.now,
                                                                scope_fp, lease.holder, lease.holder_wall,
                                                                lease.keep_s)
            assert leased is not None
            return leased, evidence, balance, TakenHit(leased, previous)
        leased = await self.add_lease(match.id, lease.lease_id, expires, lease.now)
        assert leased is not None
        return leased, evidence, balance, TakenHit(leased, None)

    async def scope_entries(self, scope_fp: str) -> list[Entry]:
        state = self._scopes.get(scope_fp)
        return list(state.entries.values()) if state is not None else []

    async def all_entries(self) -> list[Entry]:
        return list(self._by_id.values())

    async def count(self) -> int:
        return len(self._by_id)

    async def next_generation(self) -> int:
        return next(self._generations)

    async def put(self, entry: Entry) -> None:
        state = self._scopes.setdefault(entry.scope_fp, _ScopeEntries())
        state.entries[entry.id] = entry
        state.by_key[entry.key] = entry.id
        self._by_id[entry.id] = entry

    async def retire(self, entry_id: str) -> Entry | None:
        entry = self._by_id.get(entry_id)
        if entry is None:
            return None
        entry.retiring = True
        self._unkey(entry)
        return entry

    async def remove(self, entry_id: str, invalid_reason: str) -> Entry | None:
        entry = self._by_id.pop(entry_id, None)
        if entry is None:
            return None
        state = self._scopes.get(entry.scope_fp)
        if state is not None:
            state.entries.pop(entry.id, None)
            self._unkey(entry)
            if not state.entries:
                del self._scopes[entry.scope_fp]
        self._entry_holders.pop(entry.id, None)
        self._named_uses.pop(entry.id, None)
        self._reported.discard(entry.id)
        self._tombstones[entry.id] = invalid_reason
        while len(self._tombstones) > self._max_tombstones:
            self._tombstones.popitem(last=False)
        return entry

    async def tombstone(self, entry_id: str) -> str | None:
        return self._tombstones.get(entry_id)

    # --- leases and use ---------------------------------------------------------------

    async def add_lease(self, entry_id: str, lease_id: str, expires: float, now: float) -> Entry | None:
        entry = self._by_id.get(entry_id)
        if entry is not None:
            entry.leases[lease_id] = expires
            entry.uses += 1
            entry.last_used = now
        return entry

    async def lease_and_swap_holder(self, entry_id: str, lease_id: str, expires: float, now: float, scope_fp: str,
                                    holder: str, wall: float, keep_s: float) -> tuple[Entry | None, str]:
        leased = await self.add_lease(entry_id, lease_id, expires, now)
        return leased, await self.swap_holder(scope_fp, holder, entry_id, wall, keep_s)

    async def drop_lease(self, entry_id: str, lease_id: str) -> Entry | None:
        entry = self._by_id.get(entry_id)
        if entry is not None:
            entry.leases.pop(lease_id, None)
        return entry

    async def swap_holder(self, scope_fp: str, holder: str, entry_id: str, wall: float, keep_s: float) -> str:
        # keep_s bounds nothing here: the maps are bounded by count, and an
        # entry's holders go with it.
        key = (scope_fp, holder)
        previous = self._holder_entry.get(key, "")
        if not entry_id or entry_id not in self._by_id:
            return previous
        self._holder_entry.pop(key, None)
        self._holder_entry[key] = entry_id
        while len(self._holder_entry) > self._max_holders:
            self._holder_entry.popitem(last=False)
        self._named_uses[entry_id] = self._named_uses.get(entry_id, 0) + 1
        users = self._entry_holders.setdefault(entry_id, OrderedDict())
        users.pop(holder, None)
        users[holder] = wall
        while len(users) > MAX_ENTRY_HOLDERS:
            users.popitem(last=False)
        return previous

    async def holders(self, entry_id: str) -> EntryHolders:
        return EntryHolders(dict(self._entry_holders.get(entry_id, {})), self._named_uses.get(entry_id, 0))

    async def drop_expired_leases(self, entry_id: str, wall: float) -> Entry | None:
        entry = self._by_id.get(entry_id)
        if entry is not None:
            for lease_id in [lid for lid, exp in entry.leases.items() if exp <= wall]:
                del entry.leases[lease_id]
        return entry

    async def set_expiry(self, entry_id: str, expire_time: float) -> Entry | None:
        entry = self._by_id.get(entry_id)
        if entry is not None:
            entry.handle = replace(entry.handle, expire_time=expire_time)
        return entry

    async def least_recently_used_idle(self, wall: float) -> Entry | None:
        idle = [e for e in self._by_id.values() if not e.leased_at(wall)]
        return min(idle, key=lambda e: (not e.retiring, e.last_used)) if idle else None

    # --- sightings and floors -----------------------------------------------------------

    async def record_sighting(self, scope_fp: str, chain: Sequence[bytes], now: float, horizon_s: float,
                              group: str = "") -> Evidence:
        key = (scope_fp, len(chain) - 1, chain[-1])
        state = self._sighting_scopes.get(scope_fp)
        if state is None:
            state = self._sighting_scopes[scope_fp] = _ScopeSightings()
        agreeing = None
        for n in range(len(chain) - 1, -1, -1):
            seen = self._sightings.get((scope_fp, n, chain[n]))
            if seen is not None and now - seen < horizon_s:
                agreeing = max(0.0, now - seen)
                break
        head = self._sightings.get((scope_fp, 0, chain[0]))
        state.note(len(chain) > 1, agreeing, None if head is None or now - head >= horizon_s else max(0.0, now - head))
        app = self._group_firsts.pop(group, None) or deque(maxlen=SERVER_FIRSTS_KEPT)
        self._group_firsts[group] = app
        while len(self._group_firsts) > GROUPS_KEPT:
            self._group_firsts.popitem(last=False)
        outcomes = state.resolve(chain, now, horizon_s)
        self._server_firsts.extend(outcomes)
        app.extend(outcomes)
        evidence = replace(state.evidence(agreeing, False, tuple(self._server_firsts), now), app_firsts=tuple(app))
        if agreeing is None:
            state.first_seen((len(chain) - 1, chain[-1]), now)
        previous = state.previous
        previous_agrees = previous is not None and previous[0] < len(chain) and chain[previous[0]] == previous[1]
        state.previous = (len(chain) - 1, chain[-1])
        for k in (key, (scope_fp, 0, chain[0])):  # the prefix, and its head
            if self._sightings.pop(k, None) is None:
                state.records += 1
            self._sightings[k] = now
        while len(self._sightings) > self._max_sightings:
            self._drop_oldest_sighting()
        return replace(evidence, previous_agrees=previous_agrees)

    def _drop_oldest_sighting(self) -> None:
        (scope_fp, _, _), _ = self._sightings.popitem(last=False)
        state = self._sighting_scopes[scope_fp]
        state.records -= 1
        if not state.records:
            del self._sighting_scopes[scope_fp]

    async def forget_sightings(self, scope_fp: str) -> None:
        for key in [k for k in self._sightings if k[0] == scope_fp]:
            del self._sightings[key]
        self._sighting_scopes.pop(scope_fp, None)

    async def learned_floor(self, provider: str, model: str, now: float) -> int:
        floor, until = self._floors.get((provider, model), (0, 0.0))
        return floor if until > now else 0

    async def learn_floor(self, provider: str, model: str, tokens: int, now: float, keep_s: float) -> None:
        if tokens >= await self.learned_floor(provider, model, now):
            self._floors[(provider, model)] = (tokens, now + keep_s)

    async def lower_floor(self, provider: str, model: str, tokens: int, now: float) -> None:
        key = (provider, model)
        floor, until = self._floors.get(key, (0, 0.0))
        if until > now and floor > tokens:
            self._floors[key] = (tokens, until)

    async def report_create(self, entry_id: str) -> bool:
        if entry_id not in self._by_id:
            return True
        first = entry_id not in self._reported
        self._reported.add(entry_id)
        return first

    async def book_loss(self, scope_fp: str, booking: Booking, opening: float, keep_s: float) -> float:
        return self._ledger.book(scope_fp, booking, opening=opening, keep_s=keep_s)

    async def loss_balance(self, scope_fp: str, opening: float, keep_s: float, now: float) -> float:
        return self._ledger.balance(scope_fp, now, opening=opening, keep_s=keep_s)

    def _unkey(self, entry: Entry) -> None:
        state = self._scopes.get(entry.scope_fp)
        if state is not None and state.by_key.get(entry.key) == entry.id:
            del state.by_key[entry.key]
