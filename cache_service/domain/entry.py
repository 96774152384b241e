"""The registry's record of one provider cache (see docs/ARCHITECTURE.md,
"Cache service").

An entry is keyed by scope fingerprint and ``EntryKey`` (the chain digest of
its prefix and its TTL). A registry store (domain.ports.RegistryStore) owns
entries: code outside the store reads them and changes them only through
the store's methods, so a store that keeps them elsewhere (Redis) hands out
snapshots and every change still reaches it.

Shards: an entry id's first hex digit is its scope's shard (one of
``SHARDS``, from the scope fingerprint), so a store partitioned by scope
(the Redis registry's hash tags, cluster.names) finds an entry, its leases
and its tombstone from the id alone, in the slot of its scope's index.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from cache_service.domain.keys import Scope
from cache_service.domain.model import CacheHandle, CacheInfo, CacheState

EntryKey = tuple[bytes, float]  # (chain digest of the prefix, TTL seconds)

SHARDS = 16  # one hex digit


def scope_shard(scope_fp: str) -> int:
    return hashlib.sha256(scope_fp.encode()).digest()[0] % SHARDS


def new_entry_id(scope_fp: str) -> str:
    """16 hex digits: the scope's shard, then 60 random bits."""
    return f"{scope_shard(scope_fp):x}{secrets.token_hex(8)[1:]}"


def entry_shard(entry_id: str) -> int:
    """The shard ``new_entry_id`` put the id in (an id it did not make: a
    shard of its own)."""
    head = entry_id[:1]
    return int(head, 16) if head and head in "0123456789abcdef" else scope_shard(entry_id)


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
    last_used: float  # monotonic, for LRU eviction
    uses: int = 0
    leases: dict[str, float] = field(default_factory=dict)  # lease id -> expiry (wall)
    retiring: bool = False  # replaced by a grown cache; deleted once no lease names it

    @property
    def provider(self) -> str:
        return self.scope.provider

    @property
    def key(self) -> EntryKey:
        return (self.digest, self.ttl_s)

    def leased_at(self, wall: float) -> bool:
        """Whether a lease still names it at wall time ``wall``."""
        return any(exp > wall for exp in self.leases.values())

    def info(self, state: CacheState) -> CacheInfo:
        return CacheInfo(state=state, prefix_fingerprint=self.prefix_fp, prefix_tokens=self.tokens,
                         expire_time=self.handle.expire_time, scope_fingerprint=self.scope_fp, uses=self.uses)
