"""``anthropic``: Claude through the anthropic SDK's Messages API (adapter),
a MARKED provider. This module is what the registry imports: light, the
SDK is loaded only when an instance is built."""

from __future__ import annotations

from typing import Any

from cache_service.domain.ports import Provider
from cache_service.providers.anthropic.settings import PATTERNS, AnthropicFields, AnthropicRoute
from cache_service.providers.plugin import BuildEnv, ProviderPlugin, ProviderRoute, secret, usable_key


class AnthropicPlugin(ProviderPlugin):
    kinds = ("anthropic",)
    route = AnthropicRoute
    patterns = PATTERNS
    has_own_instance = True
    key_fallback = ("anthropic_api_key", "ANTHROPIC_API_KEY")
    unconfigured = "no Anthropic API key is configured"

    def configured(self, settings: Any) -> bool:
        return isinstance(settings, AnthropicFields) and usable_key(settings.anthropic_api_key)

    def build(self, settings: Any, route: ProviderRoute | None, name: str, kind: str, env: BuildEnv) -> Provider:
        from cache_service.providers.anthropic.adapter import AnthropicProvider

        s: AnthropicFields = settings
        return AnthropicProvider(
            name=name,
            api_key=secret(route.api_key if route and route.api_key else s.anthropic_api_key),
            base_url=(route.base_url if route else None) or s.anthropic_base_url,
            request_timeout_s=env.request_timeout_s,
            min_cache_tokens=(route.min_cache_tokens if route else None) or s.anthropic_min_cache_tokens,
        )


PLUGIN = AnthropicPlugin()
