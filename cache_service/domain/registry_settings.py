"""The registry's bounds, timeouts and switches (filled from CacheSettings
by cache_service.app.registry_settings)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cache_service.domain.policy import PolicySettings


@dataclass(frozen=True)
class RegistrySettings:
    failure_mode: str = "bypass"
    default_ttl_s: float = 300.0
    max_ttl_s: float = 3600.0
    max_entries: int = 256
    max_prefix_bytes: int = 4 * 1024 * 1024
    max_scope_bytes: int = 16 * 1024
    max_waiters: int = 128
    max_sightings: int = 4096
    create_timeout_s: float = 5.0
    lease_ttl_s: float = 120.0
    expiry_margin_s: float = 2.0
    refresh_on_hit: bool = True
    # Grow without making the caller wait: it leases the cache it has, and
    # later calls get the grown one. Trades a cheaper turn for a faster one.
    grow_in_background: bool = False
    # How long a learned floor (domain.observed) is kept after it was last
    # taught: a wrong one (an odd call, an estimate's error) heals.
    learned_floor_keep_s: float = 86400.0
    # Apps whose users share head-only NAMED caches (Registry.shared_scope).
    shared_head_apps: frozenset[str] = frozenset()
    policy: PolicySettings = field(default_factory=PolicySettings)
