"""Builds the configured providers and the routing table from settings,
through the registry (providers.registry): each provider's own instances
(the simulator's three shapes always; ``gemini``, ``anthropic`` and
``openai`` when their credentials are configured), then one more instance
per named route (e.g. a vLLM server as ``vllm``), or per route of a kind
without an instance of its own."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from cache_service.cluster.client import RedisClient
from cache_service.domain.ports import Clock, Provider
from cache_service.providers.plugin import BuildEnv
from cache_service.providers.registry import BY_KIND, PROVIDERS
from cache_service.providers.routes import ProviderRouter, make_router
from cache_service.settings import CacheSettings

log = logging.getLogger("agentctx.cache.providers")


def build_providers(settings: CacheSettings, clock: Clock, redis: RedisClient | None = None) -> dict[str, Provider]:
    """``redis``: the cluster's client, for a simulator with shared state."""
    env = BuildEnv(clock, settings.request_timeout_s, settings.bytes_per_token, redis)
    providers: dict[str, Provider] = {}
    for plugin in PROVIDERS:
        for name in plugin.own_instances(settings):
            providers[name] = plugin.build(settings, None, name, name, env)
    for route in settings.routes:
        if route.instance not in providers:
            providers[route.instance] = BY_KIND[route.provider].build(settings, route, route.instance,
                                                                      route.provider, env)
    return providers


def build_router(settings: CacheSettings, providers: Mapping[str, Provider] | None = None) -> ProviderRouter:
    """The routing table; says once, at start, which provider key is set but
    unusable (its models are then MODEL_NOT_ROUTED, naming the variable)."""
    vendors = [name for plugin in PROVIDERS for name in plugin.own_instances(settings)
               if name in plugin.patterns and (providers is None or name in providers)]
    for plugin in PROVIDERS:
        if plugin.key_fallback is not None and getattr(settings, plugin.key_fallback[0], None) is not None \
                and not plugin.configured(settings):
            log.warning("provider key unusable", extra={"variable": plugin.key_fallback[1]})
    hints = [(pattern, plugin.hint(settings)) for plugin in PROVIDERS for name, patterns in plugin.patterns.items()
             if name not in vendors for pattern in patterns]
    return make_router(settings.routes, settings.default_provider, vendors, hints)
