"""The registry's record of one provider cache (see docs/ARCHITECTURE.md,
"Cache service").

An entry is keyed by scope fingerprint and ``EntryKey`` (the chain digest of
its prefix and its TTL). A registry store (domain.ports.RegistryStore) owns
entries: code outside the store reads them and changes them only through
the store's methods, so a store that keeps them elsewhere (Redis) hands out
snapshots and every change still reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cache_service.domain.keys import Scope
from cache_service.domain.model import CacheHandle, CacheInfo, CacheState

EntryKey = tuple[bytes, float]  # (chain digest of the prefix, TTL seconds)


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
