"""Price shapes of the three kinds of prefix cache, and the bill the local
simulator keeps.

USD per million tokens. The default (``GEMINI``): input 0.30, cached input
0.03 (a tenth, as on Gemini 2.5 and later), cache storage 1.00 per million
token-hours, output 2.50; writing a cache is billed as normal input once.
``ANTHROPIC`` (Claude Sonnet-like): input 3.00, a write 1.25x input for the
5-minute TTL and 2x for the hour, a read 0.1x, no storage, output 15.00.
``OPENAI`` (GPT-5-like): input 1.25, cached input 0.125, writes free (billed
as input), no storage, output 10.00; ``OPENAI_WRITES``: the same on the
models that report their writes (``prompt_tokens_details.cache_write_tokens``,
gpt-5.6 and later, ``openai_reports_writes``), which bill a write at 1.25x
input. Reading a cache is billed at the cached
rate on every call; storage accrues from creation to deletion or expiry.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from cache_service.domain.policy import CachePrices


@dataclass(frozen=True)
class Pricing:
    input_per_mtok: float = 0.30
    cached_input_per_mtok: float = 0.03
    storage_per_mtok_hour: float = 1.00
    output_per_mtok: float = 2.50
    # A write's price per token; None: the input price.
    cache_write_per_mtok: float | None = None
    # A long-TTL write (Anthropic's hour); None: as a short one.
    cache_write_long_per_mtok: float | None = None


GEMINI = Pricing()
ANTHROPIC = Pricing(input_per_mtok=3.00, cached_input_per_mtok=0.30, storage_per_mtok_hour=0.0,
                    output_per_mtok=15.00, cache_write_per_mtok=3.75, cache_write_long_per_mtok=6.00)
OPENAI = Pricing(input_per_mtok=1.25, cached_input_per_mtok=0.125, storage_per_mtok_hour=0.0, output_per_mtok=10.00)
OPENAI_WRITES = replace(OPENAI, cache_write_per_mtok=1.25 * OPENAI.input_per_mtok)

_GPT = re.compile(r"^gpt-(\d+)(?:\.(\d+))?")


def openai_reports_writes(model: str) -> bool:
    """Whether an OpenAI model reports (and bills, at 1.25x input) the
    prompt tokens a call wrote to its prefix cache: gpt-5.6 and later."""
    found = _GPT.match(model)
    return found is not None and (int(found.group(1)), int(found.group(2) or 0)) >= (5, 6)


# Anthropic bills a write for a TTL above 5 minutes at the long rate.
SHORT_TTL_S = 300.0


def cache_prices(kind: str, pricing: Pricing | None = None, model: str = "") -> CachePrices:
    """What the create policy weighs for a cache kind (domain.ports.CacheKind
    value: "named", "marked", "automatic"): the shape's own prices, by default its ecosystem's (NAMED:
    GEMINI, MARKED: ANTHROPIC, AUTOMATIC: OPENAI, or OPENAI_WRITES for a
    ``model`` that bills its writes). The policy compares ratios, so one
    model's prices stand for its provider's others."""
    automatic = OPENAI_WRITES if openai_reports_writes(model) else OPENAI
    p = pricing or {"marked": ANTHROPIC, "automatic": automatic}.get(kind, GEMINI)
    write = p.cache_write_per_mtok if p.cache_write_per_mtok is not None else p.input_per_mtok
    long_write = p.cache_write_long_per_mtok if p.cache_write_long_per_mtok is not None else write
    return CachePrices(kind, p.input_per_mtok, p.cached_input_per_mtok, write, long_write, SHORT_TTL_S,
                       p.storage_per_mtok_hour)


@dataclass
class Bill:
    """Token totals of everything billed, and their cost."""

    input_tokens: int = 0  # uncached prompt tokens, not written
    cached_tokens: int = 0  # prompt tokens read from a cache
    cache_write_tokens: int = 0  # tokens written into caches
    cache_write_long_tokens: int = 0  # of those, written for a long TTL
    storage_token_hours: float = 0.0
    output_tokens: int = 0
    calls: int = 0

    def cost(self, pricing: Pricing = Pricing()) -> float:
        write = pricing.cache_write_per_mtok if pricing.cache_write_per_mtok is not None else pricing.input_per_mtok
        long_write = pricing.cache_write_long_per_mtok if pricing.cache_write_long_per_mtok is not None else write
        short = self.cache_write_tokens - self.cache_write_long_tokens
        return (
            self.input_tokens * pricing.input_per_mtok
            + short * write
            + self.cache_write_long_tokens * long_write
            + self.cached_tokens * pricing.cached_input_per_mtok
            + self.storage_token_hours * pricing.storage_per_mtok_hour
            + self.output_tokens * pricing.output_per_mtok
        ) / 1_000_000

    def as_dict(self, pricing: Pricing = Pricing()) -> dict[str, float]:
        return {**asdict(self), "cost_usd": round(self.cost(pricing), 9)}
