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


# Anthropic's documented minimum cacheable prefix by model (prompt caching
# docs, 2026): 4,096 for Claude Opus 4.5, 4.6 and 4.7 and Haiku 4.5; 2,048
# for Haiku 3 and 3.5; 1,024 for the Sonnets (3.7, 4, 4.5, 4.6), Opus 4, 4.1
# and 4.8. Below it nothing is written, read or billed, and no error says
# so: the service also learns a model's floor from calls that report
# neither (domain.observed), so a model missing here costs one call per
# learned_floor_keep_s (a day: a learned floor expires, so a wrong one heals).
_MINIMUMS = (
    (re.compile(r"^claude-(?:opus-4-[5-7]|haiku-4-5)(?:\D|$)"), 4096),
    (re.compile(r"^claude-(?:3-haiku|3-5-haiku|haiku-3)"), 2048),
)


def default_min_cache_tokens(model: str) -> int:
    return next((tokens for pattern, tokens in _MINIMUMS if pattern.match(model)), 1024)


def one_sampler(model: str) -> bool:
    """Whether the model takes ``temperature`` or ``top_p`` but refuses both
    ("cannot both be specified for this model"): Claude Opus 4.1 and every
    Claude from 4.5 on. Older names (claude-3-*, claude-sonnet-4) take both."""
    found = _VERSION.match(model)
    if found is None:
        return False
    version = (int(found.group(1)), int(found.group(2) or 0))
    return version >= (4, 5) or version == (4, 1)
