"""Key names under ``redis_key_prefix`` (one Redis, no cluster slots: the
scripts build a few keys themselves). Nothing here names a provider
resource: entries are keyed by their own ids and fingerprints."""

from __future__ import annotations

from dataclasses import dataclass

from cache_service.domain.entry import EntryKey


@dataclass(frozen=True)
class Names:
    prefix: str

    def entry(self, entry_id: str) -> str:
        return f"{self.prefix}e:{entry_id}"

    def leases(self, entry_id: str) -> str:
        return f"{self.prefix}l:{entry_id}"

    def key_index(self, scope_fp: str) -> str:
        return f"{self.prefix}k:{scope_fp}"

    def scope(self, scope_fp: str) -> str:
        return f"{self.prefix}s:{scope_fp}"

    def tombstone(self, entry_id: str) -> str:
        return f"{self.prefix}t:{entry_id}"

    def holder_entries(self, scope_fp: str) -> str:
        return f"{self.prefix}ho:{scope_fp}"

    def entry_holders(self, entry_id: str) -> str:
        return f"{self.prefix}hu:{entry_id}"

    def sightings(self, scope_fp: str) -> str:
        return f"{self.prefix}sg:{scope_fp}"

    def lock(self, scope_fp: str, key: EntryKey) -> str:
        return f"{self.prefix}f:{scope_fp}:{key_field(key)}"

    def result(self, lock: str) -> str:
        return f"{lock}:r"

    def done_channel(self, lock: str) -> str:
        return f"{self.prefix}done:{lock[len(self.prefix):]}"

    def journal(self, owner: str) -> str:
        return f"{self.prefix}j:{owner}"

    def heartbeat(self, owner: str) -> str:
        return f"{self.prefix}hb:{owner}"

    @property
    def all(self) -> str:
        return f"{self.prefix}all"

    @property
    def lru(self) -> str:
        return f"{self.prefix}lru"

    @property
    def seq(self) -> str:
        return f"{self.prefix}seq"

    @property
    def uses(self) -> str:
        return f"{self.prefix}useq"

    @property
    def generation(self) -> str:
        return f"{self.prefix}gen"

    @property
    def sighting_order(self) -> str:
        return f"{self.prefix}sgo"

    @property
    def sighting_seq(self) -> str:
        return f"{self.prefix}sgseq"

    @property
    def floors(self) -> str:
        return f"{self.prefix}floors"

    @property
    def flights(self) -> str:
        return f"{self.prefix}flights"

    @property
    def owners(self) -> str:
        return f"{self.prefix}owners"

    @property
    def journal_owner(self) -> str:
        return f"{self.prefix}jo"

    @property
    def epoch(self) -> str:
        return f"{self.prefix}epoch"

    @property
    def invalidations(self) -> str:
        return f"{self.prefix}inv"


def key_field(key: EntryKey) -> str:
    digest, ttl = key
    return f"{digest.hex()}|{ttl!r}"
