"""The simulator's settings (the ``local_*`` fields of CacheSettings, which
inherits them) and its route."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from cache_service.providers.plugin import ProviderRoute


class LocalFields(BaseModel):
    local_min_cache_tokens: int = Field(1024, ge=0, description="Simulator: smallest cache it accepts.")
    local_context_window: int = Field(32_768, ge=1, description="Simulator: context window of local-sim-* models.")
    local_shared_state: bool = Field(
        False, description="Simulator: keep its caches in Redis (redis_url, under local_state_prefix) so "
        "every replica sees the same provider, as with a real one.",
    )
    local_state_url: str | None = Field(
        None, description="Simulator: keep its shared state in this Redis instead of redis_url (a provider that "
        "stays up while the registry's Redis is down, as a real one does; for fault tests).",
    )
    local_state_prefix: str = Field("agentctx-sim:", min_length=1, max_length=64,
                                    description="Simulator: key prefix of its shared state (its own namespace).")


class LocalRoute(ProviderRoute):
    provider: Literal["local", "local-anthropic", "local-openai"]
