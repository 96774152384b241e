"""OpenAI's settings (the ``openai_*`` fields of CacheSettings, which
inherits them), its route and its defaults."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr

from cache_service.providers.plugin import ProviderRoute

DEFAULT_MIN_CACHE_TOKENS = 1024
IN_MEMORY_TTL_S = 300.0  # OpenAI keeps a prefix 5 to 10 minutes past its last use
RETENTION_S = {"24h": 86_400.0, "in_memory": IN_MEMORY_TTL_S}
PATTERNS = {"openai": ("gpt-*", "chatgpt-*", "o1*", "o3*", "o4*")}
_GPT = re.compile(r"^gpt-(\d+)(?:\.(\d+))?")
# From gpt-5.6 prompt_cache_options.ttl supersedes prompt_cache_retention;
# "30m" is its only (and default) value.
OPTIONS_TTL = "30m"


class OpenAIFields(BaseModel):
    openai_api_key: SecretStr | None = Field(
        None, description="OpenAI API key (AGENTCTX_CACHE_OPENAI_API_KEY, else OPENAI_API_KEY)."
    )
    openai_base_url: str | None = Field(None, description="Override of the OpenAI endpoint (or a compatible server).")
    openai_min_cache_tokens: int | None = Field(None, ge=0, description="Override of the minimum prefix (1,024).")
    openai_prompt_cache_retention: Literal["in_memory", "24h"] | None = Field(
        None, description="prompt_cache_retention to ask OpenAI for (24h keeps prefixes up to a day); per "
        "model: gpt-5.5 gets 24h (its only value), gpt-5.6 and later prompt_cache_options.ttl instead."
    )


class OpenAIRoute(ProviderRoute):
    provider: Literal["openai"]


def retention_params(model: str, retention: str | None) -> dict[str, Any]:
    """The prompt-cache retention fields ``model`` accepts, for the
    retention configured (none: nothing is sent, the model's default holds).
    Before gpt-5.5 (and for names that are not gpt-N): the value as
    configured. gpt-5.5 accepts only "24h" (it refuses "in_memory"). From
    gpt-5.6 the field is deprecated in favour of ``prompt_cache_options.ttl``
    (only "30m"), "in_memory" is refused and sending both is rejected."""
    if not retention:
        return {}
    found = _GPT.match(model)
    version = (int(found.group(1)), int(found.group(2) or 0)) if found else None
    if version is None or version < (5, 5):
        return {"prompt_cache_retention": retention}
    if version < (5, 6):
        return {"prompt_cache_retention": "24h"}
    return {"prompt_cache_options": {"ttl": OPTIONS_TTL}}
