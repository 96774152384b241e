"""Builds the configured providers and the routing table from settings:
the local simulator in its three shapes (``local``, ``local-anthropic``,
``local-openai``) always (``local``'s state shared in Redis with
``local_shared_state``, for cluster mode); ``gemini``, ``anthropic`` and ``openai`` when
their credentials are configured; and one more instance per named route
(e.g. a vLLM server as ``vllm``), or per route of a kind that has no
settings of its own. Adding a provider means an adapter, one entry in
``_BUILDERS`` and its kind in providers.routes.ProviderKind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import redis.asyncio as aioredis

from cache_service.domain.ports import Clock, Provider
from cache_service.providers.local import SHAPES, LocalProvider
from cache_service.providers.routes import ProviderRoute, ProviderRouter, make_router
from cache_service.providers.shared_local import SharedLocalProvider
from cache_service.settings import CacheSettings

VENDORS = ("gemini", "anthropic", "openai")


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def _gemini(settings: CacheSettings, route: ProviderRoute | None, name: str) -> Provider:
    # Imported here: the SDKs are heavy and only needed when configured.
    from cache_service.providers.gemini import GeminiProvider

    key = _secret(route.api_key if route and route.api_key else settings.gemini_api_key)
    return GeminiProvider(
        name=name,
        api_key=key,
        base_url=(route.base_url if route else None) or settings.gemini_base_url,
        api_version=settings.gemini_api_version,
        vertexai=settings.gemini_vertexai,
        project=settings.gemini_project,
        location=settings.gemini_location,
        request_timeout_s=settings.request_timeout_s,
        min_cache_tokens=(route.min_cache_tokens if route else None) or settings.gemini_min_cache_tokens,
    )


def _anthropic(settings: CacheSettings, route: ProviderRoute | None, name: str) -> Provider:
    from cache_service.providers.anthropic_messages import AnthropicProvider

    return AnthropicProvider(
        name=name,
        api_key=_secret(route.api_key if route and route.api_key else settings.anthropic_api_key),
        base_url=(route.base_url if route else None) or settings.anthropic_base_url,
        request_timeout_s=settings.request_timeout_s,
        min_cache_tokens=(route.min_cache_tokens if route else None) or settings.anthropic_min_cache_tokens,
    )


def _openai(settings: CacheSettings, route: ProviderRoute | None, name: str) -> Provider:
    from cache_service.providers.openai_chat import OpenAIProvider

    own = route is not None and route.name is not None
    return OpenAIProvider(
        name=name,
        # A named instance (a vLLM server) never borrows OpenAI's own key.
        api_key=_secret(route.api_key if own and route else settings.openai_api_key),
        base_url=(route.base_url if route else None) or (None if own else settings.openai_base_url),
        request_timeout_s=settings.request_timeout_s,
        min_cache_tokens=(route.min_cache_tokens if route else None) or settings.openai_min_cache_tokens,
        send_cache_key=route.send_cache_key if route else True,
        retention=(route.prompt_cache_retention if route else None) or settings.openai_prompt_cache_retention,
    )


def _local(settings: CacheSettings, clock: Clock, name: str, shape: str | None = None,
           redis: aioredis.Redis | None = None) -> Provider:
    kind, pricing, _ = SHAPES[shape or name]
    options: dict[str, Any] = dict(
        name=name, kind=kind, pricing=pricing, clock=clock, min_cache_tokens=settings.local_min_cache_tokens,
        context_window=settings.local_context_window, bytes_per_token=settings.bytes_per_token,
    )
    if name == "local" and settings.local_shared_state and redis is not None:
        return SharedLocalProvider(redis, settings.local_state_prefix, **options)
    return LocalProvider(**options)


_BUILDERS: dict[str, Callable[[CacheSettings, ProviderRoute | None, str], Provider]] = {
    "gemini": _gemini,
    "anthropic": _anthropic,
    "openai": _openai,
}


def build_providers(settings: CacheSettings, clock: Clock, redis: aioredis.Redis | None = None) -> dict[str, Provider]:
    """``redis``: the cluster's client, for a simulator with shared state."""
    providers: dict[str, Provider] = {
        name: _local(settings, clock, name, redis=redis) for name in ("local", "local-anthropic", "local-openai")
    }
    for vendor in VENDORS:
        if settings.vendor_configured(vendor):
            providers[vendor] = _BUILDERS[vendor](settings, None, vendor)
    for route in settings.routes:
        if route.instance in providers:
            continue
        if route.provider.startswith("local"):
            providers[route.instance] = _local(settings, clock, route.instance, route.provider)
        else:
            providers[route.instance] = _BUILDERS[route.provider](settings, route, route.instance)
    return providers


def build_router(settings: CacheSettings, providers: Mapping[str, Provider] | None = None) -> ProviderRouter:
    vendors = [v for v in VENDORS if settings.vendor_configured(v) and (providers is None or v in providers)]
    return make_router(settings.routes, settings.default_provider, vendors)
