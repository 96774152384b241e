"""Builds the registry's state backend from settings: the RegistryStore,
the SingleFlight coordinator and the LeaseCodec with its keys (see
docs/ARCHITECTURE.md, "Ports").

- ``memory`` (no ``redis_url``): this process's dicts; leases signed with
  the configured key set, else a per-process key, so leases and caches are
  known to one replica only.
- ``redis``: one registry for every replica (cache_service.cluster) on a
  single Redis, a Sentinel-managed one or a Redis Cluster (the client from
  the URL: cluster.client): the shared store, a lock per key's create, and the configured key set. Its
  ``cluster`` part (client, key names, name cipher) also serves the
  journal and the tier keeper (ports_factory, app).
"""

from __future__ import annotations

from dataclasses import dataclass

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.client import RedisClient, redis_client
from cache_service.cluster.guard import GuardedStore, RegistryGuard
from cache_service.cluster.names import Names
from cache_service.cluster.single_flight import RedisSingleFlight
from cache_service.cluster.store import RedisRegistryStore
from cache_service.domain.leases import KeySet, LeaseSigner
from cache_service.domain.memory_store import MemoryRegistryStore
from cache_service.domain.ports import LeaseCodec, RegistryStore, SigningKey, SingleFlight
from cache_service.domain.single_flight import LocalSingleFlight
from cache_service.settings import CacheSettings


@dataclass(frozen=True)
class Cluster:
    client: RedisClient
    names: Names
    cipher: NameCipher
    guard: RegistryGuard


@dataclass(frozen=True)
class RegistryBackend:
    store: RegistryStore
    flights: SingleFlight
    signer: LeaseCodec
    cluster: Cluster | None = None

    async def close(self) -> None:
        if isinstance(self.flights, RedisSingleFlight):
            await self.flights.close()
        if self.cluster is not None:
            await self.cluster.client.aclose()


def lease_signer(settings: CacheSettings) -> LeaseSigner:
    if not settings.lease_keys:
        return LeaseSigner()
    keys = [SigningKey(k.id, k.secret.get_secret_value().encode()) for k in settings.lease_keys]
    assert settings.active_lease_key_id is not None  # checked by CacheSettings
    return LeaseSigner(keys=KeySet(keys, settings.active_lease_key_id))


def connect(settings: CacheSettings) -> Cluster:
    assert settings.redis_url is not None and settings.redis_encryption_key is not None  # checked by CacheSettings
    client = redis_client(settings.redis_url.get_secret_value())
    return Cluster(client, Names(settings.redis_key_prefix),
                   NameCipher.from_base64(settings.redis_encryption_key.get_secret_value()),
                   RegistryGuard(client, timeout_s=settings.registry_timeout_s, retry_s=settings.registry_retry_s))


def build_registry_backend(settings: CacheSettings, cluster: Cluster | None = None) -> RegistryBackend:
    signer = lease_signer(settings)
    if settings.redis_url is None:
        return RegistryBackend(MemoryRegistryStore(max_sightings=settings.max_sightings), LocalSingleFlight(), signer)
    cluster = cluster or connect(settings)
    store = GuardedStore(RedisRegistryStore(cluster.client, cluster.names, cluster.cipher,
                                            max_sightings=settings.max_sightings,
                                            tombstone_ttl_s=int(max(3600.0, 2 * settings.lease_ttl_s))),
                         cluster.guard)
    # The claim is renewed while its create runs, so only a dead holder loses it.
    flights = RedisSingleFlight(cluster.client, cluster.names, max_entries=settings.max_entries,
                                claim_s=settings.flight_claim_s, slot_s=settings.create_timeout_s + 2.0,
                                guard=cluster.guard)
    return RegistryBackend(store, flights, signer, cluster)
