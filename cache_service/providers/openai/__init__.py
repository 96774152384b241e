"""``openai``: OpenAI and OpenAI-compatible servers through the openai
SDK's Chat Completions API (adapter), an AUTOMATIC provider. This module is
what the registry imports: light, the SDK is loaded only when an instance
is built."""

from __future__ import annotations

from typing import Any

from cache_service.domain.ports import Provider
from cache_service.providers.openai.settings import PATTERNS, OpenAIFields, OpenAIRoute
from cache_service.providers.plugin import BuildEnv, ProviderPlugin, ProviderRoute, secret, usable_key


class OpenAIPlugin(ProviderPlugin):
    kinds = ("openai",)
    route = OpenAIRoute
    patterns = PATTERNS
    has_own_instance = True
    key_fallback = ("openai_api_key", "OPENAI_API_KEY")
    unconfigured = "no OpenAI API key or endpoint is configured"

    def configured(self, settings: Any) -> bool:
        return isinstance(settings, OpenAIFields) and (usable_key(settings.openai_api_key)
                                                       or settings.openai_base_url is not None)

    def build(self, settings: Any, route: ProviderRoute | None, name: str, kind: str, env: BuildEnv) -> Provider:
        from cache_service.providers.openai.adapter import OpenAIProvider

        s: OpenAIFields = settings
        own = route is not None and route.name is not None
        return OpenAIProvider(
            name=name,
            # A named instance (a vLLM server) never borrows OpenAI's own key.
            api_key=secret(route.api_key if own and route else s.openai_api_key),
            base_url=(route.base_url if route else None) or (None if own else s.openai_base_url),
            request_timeout_s=env.request_timeout_s,
            min_cache_tokens=(route.min_cache_tokens if route else None) or s.openai_min_cache_tokens,
            send_cache_key=route.send_cache_key if route else True,
            retention=(route.prompt_cache_retention if route else None) or s.openai_prompt_cache_retention,
        )


PLUGIN = OpenAIPlugin()
