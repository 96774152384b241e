"""Which provider serves a model: the cache service's routing table (see
docs/ARCHITECTURE.md, "Ports"). The context side never names a provider: a
scope without one is served by the first route whose ``pattern`` (shell
style, as fnmatch) matches its model, else by ``default_provider``.

A route names a provider kind (``provider``) and, optionally, its own
instance (``name``: e.g. a vLLM server beside OpenAI itself), with the
instance's endpoint and the environment variable that holds its key
(``api_key_env``). Keys never appear in the table: they live only in the
cache service's environment and are read into SecretStr values here.
After the configured routes come the built-in ones: the local simulator's
three shapes always, and ``gemini-*``, ``claude-*`` and ``gpt-*`` / ``o1*``
/ ``o3*`` / ``o4*`` for each vendor whose key is configured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from cache_service.domain.routing import ProviderRouter

ProviderKind = Literal["local", "local-anthropic", "local-openai", "gemini", "anthropic", "openai"]

LOCAL_ROUTES: tuple[tuple[str, str], ...] = (
    ("local-sim-anthropic*", "local-anthropic"),
    ("local-sim-openai*", "local-openai"),
    ("local-sim*", "local"),
)
VENDOR_PATTERNS: Mapping[str, tuple[str, ...]] = {
    "gemini": ("gemini-*", "models/gemini-*"),
    "anthropic": ("claude-*",),
    "openai": ("gpt-*", "chatgpt-*", "o1*", "o3*", "o4*"),
}


class ProviderRoute(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str = Field(min_length=1, description="Model name pattern (shell style: claude-*, gpt-4?-*).")
    provider: ProviderKind = Field(description="The adapter that serves it.")
    name: str | None = Field(None, min_length=1, max_length=64,
                             description="Instance name (default: the provider kind), e.g. vllm.")
    base_url: str | None = Field(None, description="The instance's endpoint (OpenAI-compatible servers, proxies).")
    api_key_env: str | None = Field(None, description="Environment variable holding the instance's key.")
    api_key: SecretStr | None = Field(None, description="Filled from api_key_env; never set in a file.")
    send_cache_key: bool = Field(True, description="OpenAI-compatible: send prompt_cache_key.")
    prompt_cache_retention: Literal["in_memory", "24h"] | None = Field(
        None, description="OpenAI: prompt_cache_retention to ask for.")
    min_cache_tokens: int | None = Field(None, ge=0, description="Override of the instance's minimum prefix.")

    @property
    def instance(self) -> str:
        return self.name or self.provider


def make_router(routes: Sequence[ProviderRoute], default: str, vendors: Sequence[str]) -> ProviderRouter:
    """Configured routes first, then the simulator's and each configured
    vendor's built-in patterns."""
    table = [(r.pattern, r.instance) for r in routes]
    table.extend(LOCAL_ROUTES)
    for vendor in vendors:
        table.extend((p, vendor) for p in VENDOR_PATTERNS.get(vendor, ()))
    known = frozenset({*get_args(ProviderKind), *(r.instance for r in routes)})
    return ProviderRouter(tuple(table), default, known)
