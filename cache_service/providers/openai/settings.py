"""OpenAI's settings (the ``openai_*`` fields of CacheSettings, which
inherits them), its route and its defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from cache_service.providers.plugin import ProviderRoute

DEFAULT_MIN_CACHE_TOKENS = 1024
IN_MEMORY_TTL_S = 300.0  # OpenAI keeps a prefix 5 to 10 minutes past its last use
RETENTION_S = {"24h": 86_400.0, "in_memory": IN_MEMORY_TTL_S}
PATTERNS = {"openai": ("gpt-*", "chatgpt-*", "o1*", "o3*", "o4*")}


class OpenAIFields(BaseModel):
    openai_api_key: SecretStr | None = Field(
        None, description="OpenAI API key (AGENTCTX_CACHE_OPENAI_API_KEY, else OPENAI_API_KEY)."
    )
    openai_base_url: str | None = Field(None, description="Override of the OpenAI endpoint (or a compatible server).")
    openai_min_cache_tokens: int | None = Field(None, ge=0, description="Override of the minimum prefix (1,024).")
    openai_prompt_cache_retention: Literal["in_memory", "24h"] | None = Field(
        None, description="prompt_cache_retention to ask OpenAI for (24h keeps prefixes up to a day)."
    )


class OpenAIRoute(ProviderRoute):
    provider: Literal["openai"]
