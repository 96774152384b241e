"""The RegistryStore (domain.ports) on Redis: one registry for every
replica, on a single Redis, a Sentinel-managed one or a Redis Cluster. Each
step is one round trip: a read or a Lua script (cluster.scripts) for a
step that must be atomic across replicas, its keys all in one slot
(cluster.names: the scope's shard). A warm hit is one: the match with the
sighting and the credit, then, when the policy serves the match as it is
(domain.ports.HitTerms), the lease with the holder's use, in one script
(MATCH_CREDIT_AND_TAKE_HIT); a match the policy weighs is leased in a
second step (LEASE_AND_SWAP_HOLDER) as before.

- Entries: ``e:<id>`` (hash, cluster.codec) and ``l:<id>`` (its leases),
  an acquire's match reading index and entries in one script;
  ``k:<scope>`` maps a key to its entry id, ``s:<scope>`` holds the scope's
  ids; per shard, ``all`` orders its entries by creation and ``lru`` by
  last use, both on the shard's clock (Redis's time, strictly increasing
  in the shard; replicas' monotonic clocks differ). ``all_entries``,
  ``count`` and the eviction victim merge the shards (every shard read,
  concurrently: sweeps and creates, never a hit).
- Tombstones: ``t:<id>`` with a TTL well past the longest lease.
- Sightings: ``sg:<scope>`` when each prefix (and head) was last seen, the
  previous request's prefix, the scope's recent arrival gaps and its first
  sightings (pending, and resolved outcomes); the shard's ``sgo`` their
  recency, bounded per shard by ``max_sightings / SHARDS * 2`` (so the
  tier keeps at most twice ``max_sightings``, a busy shard an eighth of
  it). The outcomes of all scopes and of an app's (``sg:~firsts``,
  ``sg:~firsts:<app group>``, kept a day) are lists in slots of their own:
  pushed in a second step when a sighting resolves one, and read at most
  every ``FIRSTS_READ_S`` by a replica (its own pushes count at once).
  Learned floors: ``floors``, each model's floor and until when it is
  kept (wall).
- Loss accounts (domain.policy, rule 8): ``la:<scope>``, the balance and
  until when each NAMED entry's storage is paid (at most
  ``policy.PAID_KEPT``), one script per booking, expiring ``keep_s`` after
  the last: every replica books on the one account of a scope.
- Holders: ``ho:<scope>`` maps a holder to the entry it used last,
  ``hu:<id>`` an entry's latest holders to their last use (wall); both
  expire ``keep_s`` after their last write.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from cache_service.cluster import scripts
from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.client import RedisClient, Scripts
from cache_service.cluster.codec import decode_entry, entry_fields, pairs, text
from cache_service.cluster.names import Names, Shard, key_field
from cache_service.domain.entry import SHARDS, Entry, EntryKey
from cache_service.domain.memory_store import GAPS_KEPT, MAX_ENTRY_HOLDERS
from cache_service.domain.policy import PAID_KEPT, Booking, Evidence
from cache_service.domain.ports import EntryHolders, HitTerms, LossCredit, TakenHit

# Learned floors change only when a provider refuses a cache (or caches a
# prefix below one), yet every acquire reads one: a replica keeps what it read
# this long, so a hit does not pay a Redis round trip for it. A floor another
# replica learned reaches this one within that time; until then a create it
# would refuse is tried and refused once more, as before anything was learned.
# A cached call lowers a floor only when the one read is above it, so it pays
# no round trip either but at most one read per window.
FLOOR_READ_S = 5.0
# The same for the pools of first-sighting outcomes (priors of the policy).
FIRSTS_READ_S = 5.0
FIRSTS_KEPT = 64
APP_FIRSTS_KEEP_S = 86400


class RedisRegistryStore:
    def __init__(self, client: RedisClient, names: Names, cipher: NameCipher, *, max_sightings: int = 4096,
                 tombstone_ttl_s: int = 3600, floor_read_s: float = FLOOR_READ_S,
                 firsts_read_s: float = FIRSTS_READ_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._r = client
        self._floor_read_s = floor_read_s
        self._firsts_read_s = firsts_read_s
        self._monotonic = monotonic
        # provider|model -> (monotonic read time, floor, kept until (wall))
        self._floors: dict[str, tuple[float, int, float]] = {}
        self._firsts: dict[str, tuple[float, list[str]]] = {}  # pool key -> (monotonic read time, outcomes)
        self._n = names
        self._cipher = cipher
        self._shard_sightings = 2 * math.ceil(max_sightings / SHARDS)
        self._tombstone_ttl = tombstone_ttl_s
        self._scripts = Scripts(client, {name: getattr(scripts, name) for name in (
            "PUT", "RETIRE", "REMOVE", "ADD_LEASE", "DROP_LEASE", "SWAP_HOLDER", "FIRST_MATCH", "DROP_EXPIRED", "SET_EXPIRY",
            "RECORD_SIGHTING", "FORGET_SIGHTINGS", "LEARN_FLOOR", "LOWER_FLOOR", "REPORT_CREATE", "BOOK_LOSS",
            "GET_ENTRY", "SCOPE_ENTRIES", "SHARD_ENTRIES", "MATCH_AND_SIGHT", "MATCH_SIGHT_AND_CREDIT",
            "LEASE_AND_SWAP_HOLDER", "MATCH_CREDIT_AND_TAKE_HIT")})

    # --- entries --------------------------------------------------------------------

    async def get(self, entry_id: str) -> Entry | None:
        return await self._run("GET_ENTRY", entry_id, [], [])

    async def first_match(self, scope_fp: str, keys: Sequence[EntryKey],
                          usable: Callable[[Entry], bool]) -> Entry | None:
        if not keys:
            return None
        # The index lookup and the entries it names in one script.
        return self._first_usable(await self._scripts("FIRST_MATCH", *self._match_step(scope_fp, keys)), usable)

    async def match_and_record_sighting(self, scope_fp: str, keys: Sequence[EntryKey],
                                        usable: Callable[[Entry], bool], chain: Sequence[bytes], now: float,
                                        horizon_s: float, group: str = "",
                                        credit: LossCredit | None = None) -> tuple[Entry | None, Evidence, float | None]:
        # Every acquire's first step: FIRST_MATCH and RECORD_SIGHTING (and the
        # credit's BOOK_LOSS) as one script on the scope's shard.
        match_keys, match_args = self._match_step(scope_fp, keys)
        sighting_keys, sighting_args = self._sighting_step(scope_fp, chain, now, horizon_s)
        if credit is None:
            found, sighting = await self._scripts("MATCH_AND_SIGHT", [*match_keys, *sighting_keys],
                                                  [len(match_args), *match_args, *sighting_args])
            return self._first_usable(found, usable), await self._evidence(sighting, group), None
        found, sighting, balance = await self._scripts(
            "MATCH_SIGHT_AND_CREDIT", [*match_keys, *sighting_keys, self._n.loss_account(scope_fp)],
            [len(match_args), len(sighting_args), *match_args, *sighting_args,
             *_book_args(credit.booking, credit.opening, credit.keep_s)])
        return self._first_usable(found, usable), await self._evidence(sighting, group), float(text(balance))

    async def match_and_take_hit(self, scope_fp: str, keys: Sequence[EntryKey], usable: Callable[[Entry], bool],
                                 chain: Sequence[bytes], now: float, horizon_s: float, group: str, credit: LossCredit,
                                 hit: HitTerms) -> tuple[Entry | None, Evidence, float, TakenHit | None]:
        # MATCH_SIGHT_AND_CREDIT and, when the policy serves the match as it is,
        # LEASE_AND_SWAP_HOLDER (ADD_LEASE without a holder) on it: one script
        # on the scope's shard, where its entries, holders and account are.
        n, shard = self._n, self._n.of_scope(scope_fp)
        match_keys, match_args = self._match_step(scope_fp, keys)
        sighting_keys, sighting_args = self._sighting_step(scope_fp, chain, now, horizon_s)
        book_args = _book_args(credit.booking, credit.opening, credit.keep_s)
        lease = hit.lease
        found, sighting, balance, taken = await self._scripts(
            "MATCH_CREDIT_AND_TAKE_HIT", [*match_keys, *sighting_keys, n.loss_account(scope_fp), shard.lru,
                                          shard.clock, n.holder_entries(scope_fp)],
            [len(match_args), len(sighting_args), len(book_args), *match_args, *sighting_args, *book_args,
             repr(hit.wall), repr(hit.expiry_margin_s), hit.tokens, hit.history_len, repr(hit.grow_share),
             repr(hit.head_share), hit.head_floor, lease.lease_id, repr(lease.until), repr(lease.now), lease.holder,
             repr(lease.holder_wall), repr(lease.keep_s), MAX_ENTRY_HOLDERS, f"{shard.base}hu:"])
        evidence, credited = await self._evidence(sighting, group), float(text(balance))
        if not taken:
            return self._first_usable(found, usable), evidence, credited, None
        raw_id, fields, leases, previous = taken
        leased = decode_entry(text(raw_id), pairs(fields), pairs(leases), self._cipher)
        assert leased is not None  # the script leased an entry it read
        return leased, evidence, credited, TakenHit(leased, text(previous) if lease.holder else None)

    def _match_step(self, scope_fp: str, keys: Sequence[EntryKey]) -> tuple[list[str], list[Any]]:
        shard = self._n.of_scope(scope_fp)
        return [self._n.key_index(scope_fp)], [shard.entry_prefix(), shard.leases_prefix(),
                                               *(key_field(k) for k in keys)]

    def _first_usable(self, found: list[Any], usable: Callable[[Entry], bool]) -> Entry | None:
        for raw_id, fields, leases in found:
            entry_id = text(raw_id)
            entry = decode_entry(entry_id, pairs(fields), pairs(leases), self._cipher)
            if entry is not None and usable(entry):
                return entry
        return None

    async def scope_entries(self, scope_fp: str) -> list[Entry]:
        shard = self._n.of_scope(scope_fp)
        found = await self._scripts("SCOPE_ENTRIES", [self._n.scope(scope_fp)],
                                    [shard.entry_prefix(), shard.leases_prefix()])
        entries = [decode_entry(text(i), pairs(f), pairs(ls), self._cipher) for i, f, ls in found]
        return sorted((e for e in entries if e is not None), key=lambda e: e.id)

    async def all_entries(self) -> list[Entry]:
        # Each shard in one script (its entries as one snapshot), the shards concurrently, merged by creation.
        per_shard = await asyncio.gather(*(self._scripts("SHARD_ENTRIES", [shard.all], [
            shard.entry_prefix(), shard.leases_prefix()]) for shard in self._n.shards))
        ranked = heapq.merge(*([(int(created), text(i), f, ls) for i, f, ls, created in found] for found in per_shard))
        entries = (decode_entry(i, pairs(f), pairs(ls), self._cipher) for _, i, f, ls in ranked)
        return [e for e in entries if e is not None]

    async def count(self) -> int:
        return sum(await self._per_shard(lambda pipe, shard: pipe.zcard(shard.all)))

    async def next_generation(self) -> int:
        return int(await self._r.incr(self._n.generation))

    async def put(self, entry: Entry) -> None:
        fields = entry_fields(entry, self._cipher)
        flat = [v for kv in fields.items() for v in kv]
        n, shard = self._n, self._n.of_scope(entry.scope_fp)
        if n.of_entry(entry.id) != shard:
            raise ValueError("the entry id is not of its scope's shard (domain.entry.new_entry_id)")
        await self._scripts("PUT", [n.entry(entry.id), n.leases(entry.id), n.key_index(entry.scope_fp),
                                    n.scope(entry.scope_fp), shard.all, shard.lru, shard.clock],
                            [entry.id, fields["kf"], *flat])

    async def retire(self, entry_id: str) -> Entry | None:
        entry = await self.get(entry_id)
        if entry is None:
            return None
        return await self._run("RETIRE", entry_id, [self._n.key_index(entry.scope_fp)], [entry_id])

    async def remove(self, entry_id: str, invalid_reason: str) -> Entry | None:
        entry = await self.get(entry_id)
        if entry is None:
            return None
        n, shard = self._n, self._n.of_entry(entry_id)
        # Only the replica whose script removed it gets the entry back, so
        # its provider delete is queued once.
        return await self._run("REMOVE", entry_id, [
            n.key_index(entry.scope_fp), n.scope(entry.scope_fp), shard.all, shard.lru, n.tombstone(entry_id)],
            [entry_id, invalid_reason, self._tombstone_ttl])

    async def tombstone(self, entry_id: str) -> str | None:
        value = await self._r.get(self._n.tombstone(entry_id))
        return text(value) if value is not None else None

    # --- leases and use ---------------------------------------------------------------

    async def add_lease(self, entry_id: str, lease_id: str, expires: float, now: float) -> Entry | None:
        shard = self._n.of_entry(entry_id)
        return await self._run("ADD_LEASE", entry_id, [shard.lru, shard.clock],
                               [entry_id, lease_id, repr(expires), repr(now)])

    async def lease_and_swap_holder(self, entry_id: str, lease_id: str, expires: float, now: float, scope_fp: str,
                                    holder: str, wall: float, keep_s: float) -> tuple[Entry | None, str]:
        n, shard = self._n, self._n.of_entry(entry_id)
        if shard != n.of_scope(scope_fp):  # not an entry of this scope (never a match): the two steps apart
            return (await self.add_lease(entry_id, lease_id, expires, now),
                    await self.swap_holder(scope_fp, holder, entry_id, wall, keep_s))
        # A hit's second step: ADD_LEASE and SWAP_HOLDER as one script (the scope's shard).
        leased, previous = await self._scripts("LEASE_AND_SWAP_HOLDER", [
            n.entry(entry_id), n.leases(entry_id), shard.lru, shard.clock, n.holder_entries(scope_fp),
            n.entry_holders(entry_id)], [entry_id, lease_id, repr(expires), repr(now), holder, entry_id, repr(wall),
                                         repr(keep_s), MAX_ENTRY_HOLDERS])
        entry = decode_entry(entry_id, pairs(leased[0]), pairs(leased[1]), self._cipher) if leased else None
        return entry, text(previous)

    async def drop_lease(self, entry_id: str, lease_id: str) -> Entry | None:
        return await self._run("DROP_LEASE", entry_id, [], [lease_id])

    async def swap_holder(self, scope_fp: str, holder: str, entry_id: str, wall: float, keep_s: float) -> str:
        n = self._n
        if entry_id and n.of_entry(entry_id) != n.of_scope(scope_fp):
            entry_id = ""  # not an entry of this scope: nothing to record
        # With no entry the holder's previous one is only read; the script's
        # other two keys (untouched) are then named in the scope's shard.
        shard = n.of_scope(scope_fp).base
        holders, entry = (n.entry_holders(entry_id), n.entry(entry_id)) if entry_id else (f"{shard}hu:", f"{shard}e:")
        previous = await self._scripts("SWAP_HOLDER", [n.holder_entries(scope_fp), holders, entry],
                                       [holder, entry_id, repr(wall), repr(keep_s), MAX_ENTRY_HOLDERS])
        return text(previous)

    async def holders(self, entry_id: str) -> EntryHolders:
        raw = {text(k): v for k, v in (await self._r.hgetall(self._n.entry_holders(entry_id))).items()}
        named = int(raw.pop("#", 0))
        return EntryHolders({k: float(v) for k, v in raw.items()}, named)

    async def drop_expired_leases(self, entry_id: str, wall: float) -> Entry | None:
        return await self._run("DROP_EXPIRED", entry_id, [], [repr(wall)])

    async def set_expiry(self, entry_id: str, expire_time: float) -> Entry | None:
        return await self._run("SET_EXPIRY", entry_id, [], [repr(expire_time)])

    async def least_recently_used_idle(self, wall: float) -> Entry | None:
        ranked: list[list[tuple[bytes, float]]] = await self._per_shard(
            lambda pipe, shard: pipe.zrange(shard.lru, 0, -1, withscores=True))
        order = {text(m): s for shard in ranked for m, s in shard}
        idle = [e for e in await self.all_entries() if not e.leased_at(wall)]
        return min(idle, key=lambda e: (not e.retiring, order.get(e.id, 0.0))) if idle else None

    # --- sightings and floors -----------------------------------------------------------

    async def record_sighting(self, scope_fp: str, chain: Sequence[bytes], now: float, horizon_s: float,
                              group: str = "") -> Evidence:
        return await self._evidence(await self._scripts(
            "RECORD_SIGHTING", *self._sighting_step(scope_fp, chain, now, horizon_s)), group)

    def _sighting_step(self, scope_fp: str, chain: Sequence[bytes], now: float,
                       horizon_s: float) -> tuple[list[str], list[Any]]:
        n, shard = self._n, self._n.of_scope(scope_fp)
        fields = [f"{i}:{d.hex()}" for i, d in enumerate(chain)]
        return ([n.sightings(scope_fp), shard.sighting_order, f"{shard.base}sgseq"],
                [self._shard_sightings, shard.sightings_prefix(), scope_fp, repr(now), repr(horizon_s), GAPS_KEPT,
                 *fields])

    async def _evidence(self, reply: list[Any], group: str) -> Evidence:
        """RECORD_SIGHTING's reply as Evidence, the pools pushed and read."""
        age, previous, gaps, head_gaps, continued, firsts, pending, resolved = reply
        outcomes = [g for g in text(resolved).split(",") if g]
        server, app = await self._pools(outcomes, group)
        flags = text(continued).split(",")
        return Evidence(float(age) if age else None, _floats(gaps), bool(int(previous)), _floats(head_gaps),
                        flags.count("1") / len(flags), _floats(firsts), _floats(pending), _floats(",".join(server)),
                        _floats(",".join(app)))

    async def _pools(self, outcomes: list[str], group: str) -> tuple[list[str], list[str]]:
        """The server's and the app's outcomes with ``outcomes``, pushing them."""
        keys = [self._n.firsts(), self._n.firsts(group)]
        now = self._monotonic()
        stale = [k for k in keys if k not in self._firsts or now - self._firsts[k][0] >= self._firsts_read_s]
        if stale or outcomes:
            async with self._r.pipeline(transaction=False) as pipe:
                for key in keys:
                    if outcomes:
                        pipe.rpush(key, *outcomes)
                        pipe.ltrim(key, -FIRSTS_KEPT, -1)
                        if key != keys[0]:
                            pipe.expire(key, APP_FIRSTS_KEEP_S)
                for key in stale:
                    pipe.lrange(key, 0, -1)
                replies: list[Any] = await pipe.execute()
            read = iter(replies[len(replies) - len(stale):])
            for key in stale:
                # Read after this push: the outcomes are its last ones.
                pool = [text(v) for v in next(read)]
                self._firsts[key] = (now, pool[:len(pool) - len(outcomes)] if outcomes else pool)
        result: list[list[str]] = []
        for key in keys:
            known = self._firsts[key][1]
            result.append((known + outcomes)[-FIRSTS_KEPT:])
            self._firsts[key] = (self._firsts[key][0], result[-1])
        return result[0], result[1]

    async def forget_sightings(self, scope_fp: str) -> None:
        await self._scripts("FORGET_SIGHTINGS", [self._n.sightings(scope_fp), self._n.of_scope(scope_fp).sighting_order],
                            [scope_fp])

    async def book_loss(self, scope_fp: str, booking: Booking, opening: float, keep_s: float) -> float:
        balance = await self._scripts("BOOK_LOSS", [self._n.loss_account(scope_fp)],
                                      _book_args(booking, opening, keep_s))
        return float(text(balance))

    async def loss_balance(self, scope_fp: str, opening: float, keep_s: float, now: float) -> float:
        # The key expires keep_s after its last booking.
        balance = await self._r.hget(self._n.loss_account(scope_fp), "b")
        return opening if balance is None else float(text(balance))

    async def learned_floor(self, provider: str, model: str, now: float) -> int:
        field = f"{provider}|{model}"
        read = self._monotonic()
        known = self._floors.get(field)
        if known is None or read - known[0] >= self._floor_read_s:
            floor, until = _floor(await self._r.hget(self._n.floors, field))
            known = self._floors[field] = (read, floor, until)
        return known[1] if known[2] > now else 0

    async def learn_floor(self, provider: str, model: str, tokens: int, now: float, keep_s: float) -> None:
        field = f"{provider}|{model}"
        await self._scripts("LEARN_FLOOR", [self._n.floors], [field, tokens, repr(now), repr(now + keep_s)])
        self._floors.pop(field, None)

    async def lower_floor(self, provider: str, model: str, tokens: int, now: float) -> None:
        if await self.learned_floor(provider, model, now) <= tokens:
            return  # nothing to lower, as read within the window
        field = f"{provider}|{model}"
        await self._scripts("LOWER_FLOOR", [self._n.floors], [field, tokens, repr(now)])
        self._floors.pop(field, None)

    async def report_create(self, entry_id: str) -> bool:
        return bool(await self._scripts("REPORT_CREATE", [self._n.entry(entry_id)], []))

    # --- helpers ----------------------------------------------------------------------

    async def _per_shard(self, command: Callable[[Any, Shard], Any]) -> list[Any]:
        """``command`` for every shard in one pipeline (on a cluster, one per node, concurrently)."""
        async with self._r.pipeline(transaction=False) as pipe:
            for shard in self._n.shards:
                command(pipe, shard)
            return list(await pipe.execute())

    async def _run(self, script: str, entry_id: str, extra_keys: list[str], args: list[Any]) -> Entry | None:
        reply = await self._scripts(script, [self._n.entry(entry_id), self._n.leases(entry_id), *extra_keys], args)
        if not reply:
            return None
        return decode_entry(entry_id, pairs(reply[0]), pairs(reply[1]), self._cipher)


def _floor(value: object) -> tuple[int, float]:
    """A learned floor's field (scripts.LEARN_FLOOR) as (floor, kept until);
    absent, or of the old form (no expiry), none."""
    if value is None:
        return 0, 0.0
    floor, _, until = text(value).partition(":")
    return (int(floor), float(until)) if until else (0, 0.0)


def _floats(joined: object) -> tuple[float, ...]:
    return tuple(float(g) for g in text(joined).split(",") if g)


def _book_args(b: Booking, opening: float, keep_s: float) -> list[Any]:
    """BOOK_LOSS's ARGV for booking ``b``."""
    return [repr(opening), repr(b.amount), max(1, math.ceil(keep_s * 1000)), b.entry_id, repr(b.storage_rate),
            repr(b.until), "" if b.start is None else repr(b.start), repr(b.now), PAID_KEPT]
