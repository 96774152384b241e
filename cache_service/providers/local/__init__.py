"""``local``: the deterministic provider simulator (adapter) in its three
shapes, ``local`` (NAMED), ``local-anthropic`` (MARKED) and ``local-openai``
(AUTOMATIC), always built; ``local``'s state is shared in Redis with
``local_shared_state`` (shared), for cluster mode."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from cache_service.domain.ports import Provider
from cache_service.providers.local.adapter import SHAPES, LocalProvider
from cache_service.providers.local.settings import LocalFields, LocalRoute
from cache_service.providers.local.shared import SharedLocalProvider
from cache_service.providers.plugin import BuildEnv, ProviderPlugin, ProviderRoute

__all__ = ["PLUGIN", "LocalProvider", "SharedLocalProvider"]


class LocalPlugin(ProviderPlugin):
    kinds = tuple(SHAPES)
    route = LocalRoute
    # Routed whatever is configured: the most specific model prefix first.
    always_routes = tuple((f"{prefix}*", name) for name, (_, _, prefix) in SHAPES.items())
    defaults = ("local",)
    serves_any_model = False  # local-sim-* only

    def own_instances(self, settings: Any) -> tuple[str, ...]:
        return ("local", "local-anthropic", "local-openai")

    def build(self, settings: Any, route: ProviderRoute | None, name: str, kind: str, env: BuildEnv) -> Provider:
        s: LocalFields = settings
        shape_kind, pricing, _ = SHAPES[kind]
        options: dict[str, Any] = dict(
            name=name, kind=shape_kind, pricing=pricing, clock=env.clock, min_cache_tokens=s.local_min_cache_tokens,
            context_window=s.local_context_window, bytes_per_token=env.bytes_per_token,
        )
        if route is None and name == "local" and s.local_shared_state and s.local_state_url is not None:
            return SharedLocalProvider(aioredis.Redis.from_url(s.local_state_url), s.local_state_prefix,
                                       owns_client=True, **options)
        if route is None and name == "local" and s.local_shared_state and env.redis is not None:
            return SharedLocalProvider(env.redis, s.local_state_prefix, **options)
        return LocalProvider(**options)


PLUGIN = LocalPlugin()
