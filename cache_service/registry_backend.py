"""Builds the registry's state backend from settings: the RegistryStore,
the SingleFlight coordinator and the LeaseCodec with its keys (see
docs/ARCHITECTURE.md, "Ports").

Today one backend: ``memory`` (this process's dicts, a per-process lease
key), so leases and caches are known to one replica only. A backend shared
by replicas (Redis) plugs in here, returning its store, a coordinator that
locks each key's create, and a signer over a shared, rotating key set.
"""

from __future__ import annotations

from dataclasses import dataclass

from cache_service.domain.leases import LeaseSigner
from cache_service.domain.memory_store import MemoryRegistryStore
from cache_service.domain.ports import LeaseCodec, RegistryStore, SingleFlight
from cache_service.domain.single_flight import LocalSingleFlight
from cache_service.settings import CacheSettings


@dataclass(frozen=True)
class RegistryBackend:
    store: RegistryStore
    flights: SingleFlight
    signer: LeaseCodec


def build_registry_backend(settings: CacheSettings) -> RegistryBackend:
    return RegistryBackend(
        store=MemoryRegistryStore(max_sightings=settings.max_sightings),
        flights=LocalSingleFlight(),
        signer=LeaseSigner(),
    )
