"""Admission: what a request may ask for, and what the create policy
decides for it (see docs/ARCHITECTURE.md, "Cache service").

- Checks: the provider is configured, the scope is within
  ``max_scope_bytes``, the TTL is normalized to [1 s, ``max_ttl_s``].
- Matching: the live cache over the longest leading part of the prefix
  (same scope and TTL, not retiring, not within the expiry margin).
- Decision: domain.policy, fed with the floor (the provider's minimum and
  what its refusals taught) and the agreeing sightings; every non-empty
  prefix is then recorded as a sighting.
- Slots: ``max_entries`` live caches, in-flight creates included; when
  full, the least recently used cache no lease names is evicted.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctx_common.errors import FailedPrecondition, FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from cache_service.domain import policy
from cache_service.domain.entry import Entry
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.lifecycle import Lifecycle
from cache_service.domain.ports import Provider, RegistryStore, SingleFlight
from cache_service.domain.registry_settings import RegistrySettings


class Admission:
    def __init__(self, providers: Mapping[str, Provider], store: RegistryStore, flights: SingleFlight,
                 lifecycle: Lifecycle, settings: RegistrySettings) -> None:
        self.providers = providers
        self._store = store
        self._flights = flights
        self._lifecycle = lifecycle
        self._settings = settings

    def normalize_ttl(self, ttl_s: float | None) -> float:
        if not ttl_s:
            return self._settings.default_ttl_s
        return max(1.0, min(float(ttl_s), self._settings.max_ttl_s))

    def provider(self, name: str) -> Provider:
        provider = self.providers.get(name)
        if provider is None:
            raise FailedPrecondition(
                f"provider {name!r} is not configured on this cache service", reason=Reason.PROVIDER_NOT_CONFIGURED,
                metadata={"provider": name},
            )
        return provider

    def check_scope(self, scope: Scope) -> None:
        size = scope.size_bytes
        if size > self._settings.max_scope_bytes:
            raise InvalidArgument(
                f"the scope is {size} bytes, over the limit of {self._settings.max_scope_bytes}",
                reason=Reason.SCOPE_TOO_LARGE,
                metadata={"scope_bytes": size, "max_scope_bytes": self._settings.max_scope_bytes},
                field_violations=[FieldViolation("scope.policy", "the scope is too large")],
            )

    def too_large(self, view: PrefixView) -> bool:
        return view.size_bytes > self._settings.max_prefix_bytes

    async def decide(self, scope: Scope, provider: Provider, view: PrefixView,
                     ttl: float) -> tuple[policy.Decision, Entry | None]:
        """The policy's decision and the matching live cache, if any."""
        sfp = scope.fingerprint
        match = await self.match(sfp, view, ttl)
        floor = max(provider.min_cache_tokens(scope.model), await self._store.learned_floor(scope.provider, scope.model))
        # Every non-empty prefix is recorded, in the same step as the count.
        agreeing = (await self._store.agreeing_sightings(sfp, view.chain) if view.prefix.is_empty
                    else await self._store.record_sighting(sfp, view.chain))
        decision = policy.decide(
            empty=view.prefix.is_empty,
            tokens=view.tokens,
            history_len=view.history_len,
            floor=floor,
            match=policy.CachedPrefix(match.tokens, match.history_len, match.uses) if match else None,
            agreeing_sightings=agreeing,
            settings=self._settings.policy,
        )
        return decision, match

    async def match(self, scope_fp: str, view: PrefixView, ttl: float) -> Entry | None:
        """The live cache over the longest leading part of ``view``."""
        keys = [(view.chain[n], ttl) for n in range(view.history_len, -1, -1)]
        return await self._store.first_match(scope_fp, keys, self._usable)

    def _usable(self, entry: Entry) -> bool:
        return not entry.retiring and self._lifecycle.usable(entry)

    async def reserve_slot(self) -> bool:
        """Room for one more cache, evicting the least recently used idle one."""
        if await self._store.count() + self._flights.count() < self._settings.max_entries:
            return True
        return await self._lifecycle.evict_one()
