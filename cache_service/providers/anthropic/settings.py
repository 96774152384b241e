"""Anthropic's settings (the ``anthropic_*`` fields of CacheSettings, which
inherits them), its route and its defaults."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from cache_service.providers.plugin import ProviderRoute

SHORT_TTL_S = 300.0
LONG_TTL_S = 3600.0
PATTERNS = {"anthropic": ("claude-*",)}
# claude-<family>-<major>[-<minor>][-<date>]; the minor has at most 2 digits.
_VERSION = re.compile(r"^claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-|$)")


class AnthropicFields(BaseModel):
    anthropic_api_key: SecretStr | None = Field(
        None, description="Anthropic API key (AGENTCTX_CACHE_ANTHROPIC_API_KEY, else ANTHROPIC_API_KEY)."
    )
    anthropic_base_url: str | None = Field(None, description="Override of the Anthropic endpoint (tests, proxies).")
    anthropic_min_cache_tokens: int | None = Field(
        None, ge=0, description="Override of the per-model minimum prefix (default: Anthropic's, 1,024 to 4,096)."
    )


class AnthropicRoute(ProviderRoute):
    provider: Literal["anthropic"]


def default_min_cache_tokens(model: str) -> int:
    # Anthropic's documented minimums; below them nothing is written (and nothing billed).
    if "opus-4-5" in model or "haiku-4" in model:
        return 4096
    return 2048 if "haiku" in model else 1024


def one_sampler(model: str) -> bool:
    """Whether the model takes ``temperature`` or ``top_p`` but refuses both
    ("cannot both be specified for this model"): Claude Opus 4.1 and every
    Claude from 4.5 on. Older names (claude-3-*, claude-sonnet-4) take both."""
    found = _VERSION.match(model)
    if found is None:
        return False
    version = (int(found.group(1)), int(found.group(2) or 0))
    return version >= (4, 5) or version == (4, 1)
