"""What a turn costs at the local simulator's published, Gemini-like prices
(USD per million tokens; they mirror ``cache_service.domain.pricing``,
which a test keeps in step). The demo is a client: it prices what the
service reports (usage and public cache metadata), as an agent's owner
would from a provider's bill."""

from __future__ import annotations

from dataclasses import dataclass

INPUT_PER_MTOK = 0.30
CACHED_INPUT_PER_MTOK = 0.03
STORAGE_PER_MTOK_HOUR = 1.00
OUTPUT_PER_MTOK = 2.50


@dataclass(frozen=True)
class TurnCost:
    with_cache: float
    without_cache: float


def turn_cost(
    *, prompt_tokens: int, cached_tokens: int, output_tokens: int, written_tokens: int, cache_ttl_s: float
) -> TurnCost:
    """``written_tokens``: a cache created or grown for this call (its
    tokens are written at the input price once, and stored, counted here
    for its whole TTL: an upper bound)."""
    output = output_tokens * OUTPUT_PER_MTOK
    with_cache = (
        (prompt_tokens - cached_tokens) * INPUT_PER_MTOK
        + cached_tokens * CACHED_INPUT_PER_MTOK
        + written_tokens * INPUT_PER_MTOK
        + written_tokens * (cache_ttl_s / 3600.0) * STORAGE_PER_MTOK_HOUR
        + output
    )
    without_cache = prompt_tokens * INPUT_PER_MTOK + output
    return TurnCost(with_cache / 1_000_000, without_cache / 1_000_000)
