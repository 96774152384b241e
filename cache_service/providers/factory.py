"""Builds the configured providers and the routing table from settings,
through the registry (providers.registry): each provider's own instances
(the simulator's three shapes always; ``gemini``, ``anthropic`` and
``openai`` when their credentials are configured), then one more instance
per named route (e.g. a vLLM server as ``vllm``), or per route of a kind
without an instance of its own."""

from __future__ import annotations

from collections.abc import Mapping

import redis.asyncio as aioredis

from cache_service.domain.ports import Clock, Provider
from cache_service.providers.plugin import BuildEnv
from cache_service.providers.registry import BY_KIND, PROVIDERS
from cache_service.providers.routes import ProviderRouter, make_router
from cache_service.settings import CacheSettings


def build_providers(settings: CacheSettings, clock: Clock, redis: aioredis.Redis | None = None) -> dict[str, Provider]:
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
    vendors = [name for plugin in PROVIDERS for name in plugin.own_instances(settings)
               if name in plugin.patterns and (providers is None or name in providers)]
    return make_router(settings.routes, settings.default_provider, vendors)
