"""Builds the configured providers from settings: ``local`` always (its
state shared in Redis with ``local_shared_state``), and ``gemini`` when an API key or a Vertex AI project is configured."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from cache_service.domain.ports import Clock, Provider
from cache_service.providers.local import LocalProvider
from cache_service.providers.shared_local import SharedLocalProvider
from cache_service.settings import CacheSettings


def build_providers(settings: CacheSettings, clock: Clock, redis: aioredis.Redis | None = None) -> dict[str, Provider]:
    """``redis``: the cluster's client, for a simulator with shared state."""
    local: dict[str, Any] = dict(clock=clock, min_cache_tokens=settings.local_min_cache_tokens,
                                 context_window=settings.local_context_window, bytes_per_token=settings.bytes_per_token)
    providers: dict[str, Provider] = {
        "local": SharedLocalProvider(redis, settings.local_state_prefix, **local)
        if settings.local_shared_state and redis is not None else LocalProvider(**local)
    }
    if settings.gemini_configured:
        # Imported here: the SDK is heavy and only needed when configured.
        from cache_service.providers.gemini import GeminiProvider

        key = settings.gemini_api_key.get_secret_value() if settings.gemini_api_key is not None else None
        providers["gemini"] = GeminiProvider(
            api_key=key,
            base_url=settings.gemini_base_url,
            api_version=settings.gemini_api_version,
            vertexai=settings.gemini_vertexai,
            project=settings.gemini_project,
            location=settings.gemini_location,
            request_timeout_s=settings.request_timeout_s,
            min_cache_tokens=settings.gemini_min_cache_tokens,
        )
    return providers
