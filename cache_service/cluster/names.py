"""Key names under ``redis_key_prefix``, hash-tagged so that every script
touches keys of one Redis Cluster slot (on a single Redis the tags change
nothing). Nothing here names a provider resource: entries are keyed by
their own ids and fingerprints.

- Shard keys, ``<prefix>{<tag>}...``: a scope's index, entries, leases,
  tombstones, holders, sightings and create locks live in its shard
  (domain.entry.scope_shard; an entry id carries its shard), with the
  shard's own creation order (``all``), use order (``lru``), clock
  (``clock``), reserved create slots (``flights``) and sighting order
  (``sgo``). The ``SHARDS`` tags are chosen so that they fall evenly over
  the 16384 slots, hence over a cluster's masters.
- Tier keys, ``<prefix>{tier}...``: journals, their owner index, heartbeats
  and the owner set, touched together by the journal's scripts (one slot:
  a create or a delete writes one record).
- Single keys with no tag (each in a slot of its own, never in a script
  with another): ``gen``, ``floors``, ``epoch``, the first-sighting pools
  ``sg:~firsts[:<app>]``; ``inv`` and ``done:`` are channels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from cache_service.domain.entry import SHARDS, EntryKey, entry_shard, scope_shard


def _tags() -> tuple[str, ...]:
    """For each shard, the shortest tag whose slot falls in its share of the slots."""
    width = REDIS_CLUSTER_HASH_SLOTS // SHARDS
    found: dict[int, str] = {}
    n = 0
    while len(found) < SHARDS:
        tag = f"s{n}"
        found.setdefault(key_slot(tag.encode()) // width, tag)
        n += 1
    return tuple(found[i] for i in range(SHARDS))


TAGS = _tags()


@dataclass(frozen=True)
class Shard:
    """The keys of one shard that are not per entry or per scope."""

    base: str  # "<prefix>{<tag>}"

    @property
    def all(self) -> str:
        return f"{self.base}all"

    @property
    def lru(self) -> str:
        return f"{self.base}lru"

    @property
    def clock(self) -> str:
        return f"{self.base}clock"

    @property
    def flights(self) -> str:
        return f"{self.base}flights"

    @property
    def sighting_order(self) -> str:
        return f"{self.base}sgo"

    def entry_prefix(self) -> str:
        return f"{self.base}e:"

    def leases_prefix(self) -> str:
        return f"{self.base}l:"

    def sightings_prefix(self) -> str:
        return f"{self.base}sg:"


@dataclass(frozen=True)
class Names:
    prefix: str
    shards: tuple[Shard, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if "{" in self.prefix or "}" in self.prefix:
            raise ValueError("redis_key_prefix must not hold '{' or '}' (the keys' hash tags follow it)")
        object.__setattr__(self, "shards", tuple(Shard(f"{self.prefix}{{{tag}}}") for tag in TAGS))

    def of_scope(self, scope_fp: str) -> Shard:
        return self.shards[scope_shard(scope_fp)]

    def of_entry(self, entry_id: str) -> Shard:
        return self.shards[entry_shard(entry_id)]

    # --- per entry (the shard its id names) ---------------------------------------------

    def entry(self, entry_id: str) -> str:
        return f"{self.of_entry(entry_id).base}e:{entry_id}"

    def leases(self, entry_id: str) -> str:
        return f"{self.of_entry(entry_id).base}l:{entry_id}"

    def tombstone(self, entry_id: str) -> str:
        return f"{self.of_entry(entry_id).base}t:{entry_id}"

    def entry_holders(self, entry_id: str) -> str:
        return f"{self.of_entry(entry_id).base}hu:{entry_id}"

    # --- per scope (its shard) ----------------------------------------------------------

    def key_index(self, scope_fp: str) -> str:
        return f"{self.of_scope(scope_fp).base}k:{scope_fp}"

    def scope(self, scope_fp: str) -> str:
        return f"{self.of_scope(scope_fp).base}s:{scope_fp}"

    def holder_entries(self, scope_fp: str) -> str:
        return f"{self.of_scope(scope_fp).base}ho:{scope_fp}"

    def sightings(self, scope_fp: str) -> str:
        return f"{self.of_scope(scope_fp).base}sg:{scope_fp}"

    def loss_account(self, scope_fp: str) -> str:
        return f"{self.of_scope(scope_fp).base}la:{scope_fp}"

    def lock(self, scope_fp: str, key: EntryKey) -> str:
        return f"{self.of_scope(scope_fp).base}f:{scope_fp}:{key_field(key)}"

    def result(self, lock: str) -> str:
        return f"{lock}:r"

    def done_channel(self, lock: str) -> str:
        return f"{self.prefix}done:{lock[len(self.prefix):]}"

    # --- the tier's journal (one slot) --------------------------------------------------

    @property
    def _tier(self) -> str:
        return f"{self.prefix}{{tier}}"

    def journal(self, owner: str) -> str:
        return f"{self._tier}j:{owner}"

    def heartbeat(self, owner: str) -> str:
        return f"{self._tier}hb:{owner}"

    @property
    def owners(self) -> str:
        return f"{self._tier}owners"

    @property
    def journal_owner(self) -> str:
        return f"{self._tier}jo"

    # --- single keys --------------------------------------------------------------------

    @property
    def generation(self) -> str:
        return f"{self.prefix}gen"

    @property
    def floors(self) -> str:
        return f"{self.prefix}floors"

    @property
    def epoch(self) -> str:
        return f"{self.prefix}epoch"

    def firsts(self, group: str | None = None) -> str:
        """The first-sighting outcomes of every scope (None) or of an app's."""
        return f"{self.prefix}sg:~firsts" if group is None else f"{self.prefix}sg:~firsts:{group}"

    @property
    def invalidations(self) -> str:
        return f"{self.prefix}inv"


def key_field(key: EntryKey) -> str:
    digest, ttl = key
    return f"{digest.hex()}|{ttl!r}"
