"""The whole set of the cache service's ports, built from settings in one
place (see docs/ARCHITECTURE.md, "Ports"): clock, providers
(providers.factory), journal, cleanup workers and the registry backend
(registry_backend). With ``redis_url`` the journal is the replica's part of
the tier's journal in Redis (cluster.journal, spilling to a local file in
``data_dir`` while Redis is down) and ``tier`` keeps its
heartbeat and recovers dead replicas' caches; without it, a local file.
Tests and benchmarks may pass their own clock or providers.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from cache_service.cluster.journal import SPILL_FILE, RedisJournal
from cache_service.cluster.tier import TierKeeper
from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import SystemClock
from cache_service.domain.ports import Clock, Journal, Provider
from cache_service.journal import FileJournal
from cache_service.providers.factory import build_providers
from cache_service.registry_backend import RegistryBackend, build_registry_backend, connect
from cache_service.settings import CacheSettings


@dataclass(frozen=True)
class CachePorts:
    clock: Clock
    providers: Mapping[str, Provider]
    journal: Journal
    cleanup: Janitor
    backend: RegistryBackend
    tier: TierKeeper | None = None


async def build_ports(settings: CacheSettings, *, clock: Clock | None = None,
                      providers: Mapping[str, Provider] | None = None) -> CachePorts:
    clock = clock or SystemClock()
    cluster = connect(settings) if settings.redis_url is not None else None
    redis = cluster.client if cluster is not None else None
    providers = dict(providers) if providers is not None else build_providers(settings, clock, redis)
    journal: Journal
    if cluster is not None:
        # Records Redis cannot take while it is down go to a local file, reconciled when it is back.
        spill = await FileJournal.open(settings.data_dir, SPILL_FILE)
        journal = RedisJournal(cluster.client, cluster.names, cluster.cipher, owner=secrets.token_hex(8),
                               guard=cluster.guard, spill=spill)
    else:
        journal = await FileJournal.open(settings.data_dir)
    cleanup = Janitor(providers, journal, workers=settings.cleanup_workers,
                      delete_timeout_s=settings.delete_timeout_s, attempts=settings.cleanup_attempts)
    tier = None
    if cluster is not None and isinstance(journal, RedisJournal):
        tier = TierKeeper(cluster.client, cluster.names, journal, providers, cleanup, clock,
                          heartbeat_s=settings.replica_heartbeat_s, dead_after_s=settings.replica_dead_after_s,
                          sweep_s=settings.tier_sweep_interval_s, guard=cluster.guard)
    return CachePorts(clock, providers, journal, cleanup, build_registry_backend(settings, cluster), tier)
