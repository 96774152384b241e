"""What the cache service's RPCs share, and its start-up and shutdown:
providers, the journal, the cleanup workers, the registry, the sweeper and
start-up recovery."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import SecretStr

from cache_service.cluster.tier import TierKeeper
from cache_service.domain.capabilities import RoutingKeys
from cache_service.domain.cleanup import Janitor
from cache_service.domain.generation import Generator
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import Clock, Journal, Provider, RegistryUnavailable
from cache_service.domain.registry import Registry
from cache_service.domain.registry_settings import RegistrySettings
from cache_service.ports_factory import build_ports
from cache_service.recovery import RecoveryReport, recover
from cache_service.registry_backend import RegistryBackend
from cache_service.settings import CacheSettings

log = logging.getLogger("agentctx.cache")


def registry_settings(s: CacheSettings) -> RegistrySettings:
    return RegistrySettings(
        failure_mode=s.failure_mode, default_ttl_s=s.default_ttl_s, max_ttl_s=s.max_ttl_s,
        max_entries=s.max_entries, max_prefix_bytes=s.max_prefix_bytes, max_scope_bytes=s.max_scope_bytes,
        max_waiters=s.max_waiters, max_sightings=s.max_sightings, create_timeout_s=s.create_timeout_s,
        lease_ttl_s=s.lease_ttl_s, expiry_margin_s=s.expiry_margin_s, refresh_on_hit=s.refresh_on_hit,
        grow_in_background=s.grow_in_background, learned_floor_keep_s=s.learned_floor_keep_s,
        shared_head_apps=frozenset(s.shared_head_apps),
        policy=PolicySettings(min_prefix_tokens=s.min_prefix_tokens,
                              sightings_before_create=s.sightings_before_create, grow_share=s.grow_share,
                              variant=s.create_policy, refresh_after_uses=s.adk_cache_intervals,
                              first_sighting_prior=s.first_sighting_prior,
                              first_sighting_prior_named=s.first_sighting_prior_named,
                              first_sighting_weight=s.first_sighting_prior_weight,
                              first_sighting_weight_named=s.first_sighting_prior_weight_named,
                              loss_allowance_tokens=s.loss_allowance_tokens, loss_tolerance=s.loss_tolerance,
                              loss_account_keep_s=s.loss_account_keep_s),
    )


def routing_keys(s: CacheSettings) -> RoutingKeys:
    """The routing keys' secret, derived (HMAC, so the material itself is
    never the key) from configured material the replicas share:
    ``redis_encryption_key`` (steady across lease-key rotations), else the
    active lease key. Without either, a random per-process secret: routing
    then changes on every restart and differs between replicas, so a
    cluster must configure one (with ``redis_url`` both are required)."""
    material: SecretStr | None = s.redis_encryption_key
    if material is None and s.lease_keys:
        material = next((k.secret for k in s.lease_keys if k.id == s.active_lease_key_id), None)
    if material is None:
        log.debug("prompt_cache_key uses a per-process secret: configure redis_encryption_key or lease_keys "
                 "to keep routing across restarts and replicas")
        return RoutingKeys()
    return RoutingKeys(hmac.new(material.get_secret_value().encode(), b"agentctx-routing-key-v1",
                                hashlib.sha256).digest())


@dataclass
class CacheApp:
    settings: CacheSettings
    clock: Clock
    providers: Mapping[str, Provider]
    journal: Journal
    janitor: Janitor
    registry: Registry
    generator: Generator
    backend: RegistryBackend | None = None
    tier: TierKeeper | None = None
    recovery: RecoveryReport | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _recovered: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def create(
        cls, settings: CacheSettings, *, clock: Clock | None = None, providers: Mapping[str, Provider] | None = None
    ) -> CacheApp:
        ports = await build_ports(settings, clock=clock, providers=providers)
        backend = ports.backend
        registry = Registry(ports.providers, ports.journal, ports.cleanup, ports.clock, registry_settings(settings),
                            backend.signer, store=backend.store, flights=backend.flights)
        generator = Generator(registry, request_timeout_s=settings.request_timeout_s,
                              routing_keys=routing_keys(settings), bytes_per_token=settings.bytes_per_token)
        return cls(settings, ports.clock, ports.providers, ports.journal, ports.cleanup, registry, generator,
                   backend, ports.tier)

    def start(self) -> None:
        """Starts the cleanup workers, the sweeper and journal recovery; on
        Redis also the heartbeat and the tier's sweep of dead replicas."""
        self.janitor.start()
        self._tasks.append(asyncio.create_task(self._sweep_forever(), name="cache-sweeper"))
        self._tasks.append(asyncio.create_task(self._recover(), name="cache-recovery"))
        if self.tier is not None:
            self._tasks.append(asyncio.create_task(self.tier.heartbeat_forever(), name="cache-heartbeat"))
            self._tasks.append(asyncio.create_task(self.tier.sweep_forever(), name="cache-tier-sweep"))

    async def recovered(self) -> RecoveryReport | None:
        """Waits for start-up recovery to have queued its deletes."""
        await self._recovered.wait()
        return self.recovery

    async def close(self) -> None:
        pending = set(self._tasks)
        while pending:
            # Cancelled again until done: a cancellation that lands inside a
            # Redis client's own timeout handling can be swallowed there.
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        await self.registry.close()
        await self.janitor.close(self.settings.delete_timeout_s)
        for provider in self.providers.values():
            await provider.close()
        await self.journal.close()
        if self.backend is not None:
            await self.backend.close()

    async def _recover(self) -> None:
        try:
            self.recovery = await recover(self.journal, self.providers, self.janitor)
        except Exception as exc:  # noqa: BLE001 - recovery must never stop the service
            log.error("journal recovery failed", extra={"error_type": type(exc).__name__})
        finally:
            self._recovered.set()

    async def _sweep_forever(self) -> None:
        pause = self.settings.sweep_interval_s
        while True:
            await asyncio.sleep(pause)
            pause = self.settings.sweep_interval_s
            try:
                await self.registry.sweep()
            except RegistryUnavailable:
                # Logged once per outage by the registry's guard; try again after its retry interval.
                pause = max(pause, self.settings.registry_retry_s)
            except Exception as exc:  # noqa: BLE001 - the sweeper must keep running
                log.error("sweep failed", extra={"error_type": type(exc).__name__})
