"""Gemini's settings (the ``gemini_*`` fields of CacheSettings, which
inherits them), its route and its defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator

from cache_service.providers.plugin import ProviderRoute, usable_key


class GeminiFields(BaseModel):
    # google-genai: the Gemini API with an API key, or Vertex AI.
    gemini_api_key: SecretStr | None = Field(
        None, description="Gemini API key (AGENTCTX_CACHE_GEMINI_API_KEY, else GEMINI_API_KEY)."
    )
    gemini_base_url: str | None = Field(None, description="Override of the Gemini endpoint (tests, proxies).")
    gemini_api_version: str | None = Field(
        None, description="API version (default: v1beta on the Gemini API, v1beta1 on Vertex AI)."
    )
    gemini_vertexai: bool = Field(False, description="Use Vertex AI (project + location, ADC) instead of an API key.")
    gemini_project: str | None = Field(None, description="Vertex AI project.")
    gemini_location: str | None = Field(None, description="Vertex AI location, e.g. us-central1.")
    gemini_min_cache_tokens: int | None = Field(
        None, ge=0, description="Override of the per-model minimum cache size (default: 2,048 for gemini-2.x, 4,096 for gemini-3)."
    )

    @model_validator(mode="after")
    def _gemini_vertexai_located(self) -> GeminiFields:
        if self.gemini_vertexai and not (self.gemini_project and self.gemini_location) and not self.gemini_base_url:
            raise ValueError("gemini_vertexai needs gemini_project and gemini_location")
        return self

    @property
    def gemini_configured(self) -> bool:
        return self.gemini_vertexai or usable_key(self.gemini_api_key)


class GeminiRoute(ProviderRoute):
    provider: Literal["gemini"]


PATTERNS = {"gemini": ("gemini-*", "models/gemini-*")}


def default_min_cache_tokens(model: str) -> int:
    # adk-python's floors; the service's "too small" answer is authoritative.
    return 4096 if model.removeprefix("models/").startswith("gemini-3") else 2048
