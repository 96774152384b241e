"""The RegistryStore (domain.ports) on Redis: one registry for every
replica. Each method is one round trip: a read, a MULTI pipeline, or a Lua
script (cluster.scripts) for a step that must be atomic across replicas.

- Entries: ``e:<id>`` (hash, cluster.codec) and ``l:<id>`` (its leases),
  an acquire's match reading index and entries in one script;
  ``k:<scope>`` maps a key to its entry id, ``s:<scope>`` holds the scope's
  ids, ``all`` orders every entry by creation and ``lru`` by last use (a
  shared counter, since replicas' monotonic clocks differ).
- Tombstones: ``t:<id>`` with a TTL well past the longest lease.
- Sightings: ``sg:<scope>`` when each prefix (and head) was last seen, the
  previous request's prefix, the scope's recent arrival gaps and its first
  sightings (pending, and resolved outcomes; ``sg:~firsts`` those of all
  scopes, ``sg:~firsts:<app group>`` those of an app's, kept a day); ``sgo``
  their recency, bounded by ``max_sightings`` over all scopes. Learned
  floors: ``floors``.
- Holders: ``ho:<scope>`` maps a holder to the entry it used last,
  ``hu:<id>`` an entry's latest holders to their last use (wall); both
  expire ``keep_s`` after their last write.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio as aioredis

from cache_service.cluster import scripts
from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.codec import decode_entry, entry_fields, pairs, text
from cache_service.cluster.names import Names, key_field
from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.memory_store import GAPS_KEPT, MAX_ENTRY_HOLDERS
from cache_service.domain.policy import Evidence
from cache_service.domain.ports import EntryHolders

# Learned floors change only when a provider refuses a cache, yet every
# acquire reads one: a replica keeps what it read this long, so a hit does not
# pay a Redis round trip for it. A floor another replica learned reaches this
# one within that time; until then a create it would refuse is tried and
# refused once more, as before anything was learned.
FLOOR_READ_S = 5.0


class RedisRegistryStore:
    def __init__(self, client: aioredis.Redis, names: Names, cipher: NameCipher, *, max_sightings: int = 4096,
                 tombstone_ttl_s: int = 3600, floor_read_s: float = FLOOR_READ_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._r = client
        self._floor_read_s = floor_read_s
        self._monotonic = monotonic
        self._floors: dict[str, tuple[float, int]] = {}  # provider|model -> (monotonic read time, floor)
        self._n = names
        self._cipher = cipher
        self._max_sightings = max_sightings
        self._tombstone_ttl = tombstone_ttl_s
        self._scripts = {name: client.register_script(getattr(scripts, name)) for name in (
            "PUT", "RETIRE", "REMOVE", "ADD_LEASE", "DROP_LEASE", "SWAP_HOLDER", "FIRST_MATCH", "DROP_EXPIRED", "SET_EXPIRY",
            "RECORD_SIGHTING", "FORGET_SIGHTINGS", "LEARN_FLOOR")}

    # --- entries --------------------------------------------------------------------

    async def get(self, entry_id: str) -> Entry | None:
        return (await self._many([entry_id]))[0]

    async def first_match(self, scope_fp: str, keys: Sequence[EntryKey],
                          usable: Callable[[Entry], bool]) -> Entry | None:
        if not keys:
            return None
        # The index lookup and the entries it names in one script: this is every acquire's first step.
        n = self._n
        found = await self._scripts["FIRST_MATCH"](
            keys=[n.key_index(scope_fp)], args=[n.entry(""), n.leases(""), *(key_field(k) for k in keys)])
        for raw_id, fields, leases in found:
            entry_id = text(raw_id)
            entry = decode_entry(entry_id, pairs(fields), pairs(leases), self._cipher)
            if entry is not None and usable(entry):
                return entry
        return None

    async def scope_entries(self, scope_fp: str) -> list[Entry]:
        ids = sorted(text(i) for i in await self._r.smembers(self._n.scope(scope_fp)))
        return [e for e in await self._many(ids) if e is not None]

    async def all_entries(self) -> list[Entry]:
        ids = [text(i) for i in await self._r.zrange(self._n.all, 0, -1)]
        return [e for e in await self._many(ids) if e is not None]

    async def count(self) -> int:
        return int(await self._r.zcard(self._n.all))

    async def next_generation(self) -> int:
        return int(await self._r.incr(self._n.generation))

    async def put(self, entry: Entry) -> None:
        fields = entry_fields(entry, self._cipher)
        flat = [v for kv in fields.items() for v in kv]
        n = self._n
        await self._scripts["PUT"](
            keys=[n.entry(entry.id), n.leases(entry.id), n.key_index(entry.scope_fp), n.scope(entry.scope_fp),
                  n.all, n.lru, n.seq, n.uses],
            args=[entry.id, fields["kf"], *flat])

    async def retire(self, entry_id: str) -> Entry | None:
        entry = await self.get(entry_id)
        if entry is None:
            return None
        return await self._run("RETIRE", entry_id, [self._n.key_index(entry.scope_fp)], [entry_id])

    async def remove(self, entry_id: str, invalid_reason: str) -> Entry | None:
        entry = await self.get(entry_id)
        if entry is None:
            return None
        n = self._n
        # Only the replica whose script removed it gets the entry back, so
        # its provider delete is queued once.
        return await self._run("REMOVE", entry_id, [
            n.key_index(entry.scope_fp), n.scope(entry.scope_fp), n.all, n.lru, n.tombstone(entry_id)],
            [entry_id, invalid_reason, self._tombstone_ttl])

    async def tombstone(self, entry_id: str) -> str | None:
        value = await self._r.get(self._n.tombstone(entry_id))
        return text(value) if value is not None else None

    # --- leases and use ---------------------------------------------------------------

    async def add_lease(self, entry_id: str, lease_id: str, expires: float, now: float) -> Entry | None:
        return await self._run("ADD_LEASE", entry_id, [self._n.lru, self._n.uses],
                               [entry_id, lease_id, repr(expires), repr(now)])

    async def drop_lease(self, entry_id: str, lease_id: str) -> Entry | None:
        return await self._run("DROP_LEASE", entry_id, [], [lease_id])

    async def swap_holder(self, scope_fp: str, holder: str, entry_id: str, wall: float, keep_s: float) -> str:
        n = self._n
        previous = await self._scripts["SWAP_HOLDER"](
            keys=[n.holder_entries(scope_fp), n.entry_holders(entry_id), n.entry(entry_id)],
            args=[holder, entry_id, repr(wall), repr(keep_s), MAX_ENTRY_HOLDERS])
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
        ranked: list[tuple[bytes, float]] = await self._r.zrange(self._n.lru, 0, -1, withscores=True)  # type: ignore[assignment]  # redis-py types withscores replies loosely
        order = {text(m): s for m, s in ranked}
        idle = [e for e in await self.all_entries() if not e.leased_at(wall)]
        return min(idle, key=lambda e: (not e.retiring, order.get(e.id, 0.0))) if idle else None

    # --- sightings and floors -----------------------------------------------------------

    async def record_sighting(self, scope_fp: str, chain: Sequence[bytes], now: float, horizon_s: float,
                              group: str = "") -> Evidence:
        n = self._n
        fields = [f"{i}:{d.hex()}" for i, d in enumerate(chain)]
        age, previous, gaps, head_gaps, continued, firsts, pending, server, app = await self._scripts["RECORD_SIGHTING"](
            keys=[n.sightings(scope_fp), n.sighting_order, n.sighting_seq, n.sightings("~firsts"),
                  n.sightings(f"~firsts:{group}")],
            args=[self._max_sightings, n.sightings(""), scope_fp, repr(now), repr(horizon_s), GAPS_KEPT, *fields])
        flags = text(continued).split(",")
        return Evidence(float(age) if age else None, _floats(gaps), bool(int(previous)), _floats(head_gaps),
                        flags.count("1") / len(flags), _floats(firsts), int(pending), _floats(server), _floats(app))

    async def forget_sightings(self, scope_fp: str) -> None:
        await self._scripts["FORGET_SIGHTINGS"](keys=[self._n.sightings(scope_fp), self._n.sighting_order],
                                                args=[scope_fp])

    async def learned_floor(self, provider: str, model: str) -> int:
        field = f"{provider}|{model}"
        now = self._monotonic()
        known = self._floors.get(field)
        if known is not None and now - known[0] < self._floor_read_s:
            return known[1]
        value = await self._r.hget(self._n.floors, field)
        floor = int(value) if value is not None else 0
        self._floors[field] = (now, floor)
        return floor

    async def learn_floor(self, provider: str, model: str, tokens: int) -> None:
        field = f"{provider}|{model}"
        await self._scripts["LEARN_FLOOR"](keys=[self._n.floors], args=[field, tokens])
        self._floors.pop(field, None)

    # --- helpers ----------------------------------------------------------------------

    async def _many(self, ids: Sequence[str]) -> list[Entry | None]:
        if not ids:
            return []
        async with self._r.pipeline(transaction=True) as pipe:
            for entry_id in ids:
                pipe.hgetall(self._n.entry(entry_id))
                pipe.hgetall(self._n.leases(entry_id))
            raw: list[Any] = await pipe.execute()
        return [decode_entry(entry_id, raw[2 * i], raw[2 * i + 1], self._cipher) for i, entry_id in enumerate(ids)]

    async def _run(self, script: str, entry_id: str, extra_keys: list[str], args: list[Any]) -> Entry | None:
        reply = await self._scripts[script](
            keys=[self._n.entry(entry_id), self._n.leases(entry_id), *extra_keys], args=args)
        if not reply:
            return None
        return decode_entry(entry_id, pairs(reply[0]), pairs(reply[1]), self._cipher)


def _floats(joined: object) -> tuple[float, ...]:
    return tuple(float(g) for g in text(joined).split(",") if g)
