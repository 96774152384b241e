"""Gemini-like prices, and the bill the local simulator keeps.

Defaults (USD per million tokens): input 0.30, cached input 0.03 (a tenth,
as on Gemini 2.5 and later), cache storage 1.00 per million token-hours,
output 2.50. Writing a cache is billed as normal input once; reading it is
billed at the cached rate on every call; storage accrues from creation to
deletion or expiry, whichever comes first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Pricing:
    input_per_mtok: float = 0.30
    cached_input_per_mtok: float = 0.03
    storage_per_mtok_hour: float = 1.00
    output_per_mtok: float = 2.50


@dataclass
class Bill:
    """Token totals of everything billed, and their cost."""

    input_tokens: int = 0  # uncached prompt tokens
    cached_tokens: int = 0  # prompt tokens read from a cache
    cache_write_tokens: int = 0  # tokens written into caches
    storage_token_hours: float = 0.0
    output_tokens: int = 0
    calls: int = 0

    def cost(self, pricing: Pricing = Pricing()) -> float:
        return (
            (self.input_tokens + self.cache_write_tokens) * pricing.input_per_mtok
            + self.cached_tokens * pricing.cached_input_per_mtok
            + self.storage_token_hours * pricing.storage_per_mtok_hour
            + self.output_tokens * pricing.output_per_mtok
        ) / 1_000_000

    def as_dict(self, pricing: Pricing = Pricing()) -> dict[str, float]:
        return {**asdict(self), "cost_usd": round(self.cost(pricing), 9)}
