"""``gemini``: Gemini through google-genai (adapter), a NAMED provider.
This module is what the registry imports: light, the SDK is loaded only
when an instance is built."""

from __future__ import annotations

from typing import Any

from cache_service.domain.ports import Provider
from cache_service.providers.gemini.settings import PATTERNS, GeminiFields, GeminiRoute
from cache_service.providers.plugin import BuildEnv, ProviderPlugin, ProviderRoute, secret


class GeminiPlugin(ProviderPlugin):
    kinds = ("gemini",)
    route = GeminiRoute
    patterns = PATTERNS
    has_own_instance = True
    key_fallback = ("gemini_api_key", "GEMINI_API_KEY")
    defaults = ("gemini",)
    unconfigured = "no Gemini API key or Vertex AI project is configured"

    def configured(self, settings: Any) -> bool:
        return isinstance(settings, GeminiFields) and settings.gemini_configured

    def build(self, settings: Any, route: ProviderRoute | None, name: str, kind: str, env: BuildEnv) -> Provider:
        from cache_service.providers.gemini.adapter import GeminiProvider

        s: GeminiFields = settings
        return GeminiProvider(
            name=name,
            api_key=secret(route.api_key if route and route.api_key else s.gemini_api_key),
            base_url=(route.base_url if route else None) or s.gemini_base_url,
            api_version=s.gemini_api_version,
            vertexai=s.gemini_vertexai,
            project=s.gemini_project,
            location=s.gemini_location,
            request_timeout_s=env.request_timeout_s,
            min_cache_tokens=(route.min_cache_tokens if route else None) or s.gemini_min_cache_tokens,
        )


PLUGIN = GeminiPlugin()
