"""The whole set of the cache service's ports, built from settings in one
place (see docs/ARCHITECTURE.md, "Ports"): clock, providers
(providers.factory), journal, cleanup workers and the registry backend
(registry_backend). Tests and benchmarks may pass their own clock or
providers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import SystemClock
from cache_service.domain.ports import Clock, Journal, Provider
from cache_service.journal import FileJournal
from cache_service.providers.factory import build_providers
from cache_service.registry_backend import RegistryBackend, build_registry_backend
from cache_service.settings import CacheSettings


@dataclass(frozen=True)
class CachePorts:
    clock: Clock
    providers: Mapping[str, Provider]
    journal: Journal
    cleanup: Janitor
    backend: RegistryBackend


async def build_ports(settings: CacheSettings, *, clock: Clock | None = None,
                      providers: Mapping[str, Provider] | None = None) -> CachePorts:
    clock = clock or SystemClock()
    providers = dict(providers) if providers is not None else build_providers(settings, clock)
    journal = await FileJournal.open(settings.data_dir)
    cleanup = Janitor(providers, journal, workers=settings.cleanup_workers,
                      delete_timeout_s=settings.delete_timeout_s, attempts=settings.cleanup_attempts)
    return CachePorts(clock, providers, journal, cleanup, build_registry_backend(settings))
