"""What a turn costs at the local simulator's published prices, in the
price shape of the provider it imitates (USD per million tokens; they
mirror ``cache_service.domain.pricing``, which a test keeps in step). The
demo is a client: it prices what the service reports (usage and public
cache metadata), as an agent's owner would from a provider's bill."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """One provider's cache semantics and prices, as the simulator plays them."""

    provider: str
    model: str  # routed by the cache service to the simulator in this shape
    label: str
    input_per_mtok: float
    cached_input_per_mtok: float
    output_per_mtok: float
    # Gemini-like named caches: written once at the input price when created
    # or grown, then stored per token-hour. Otherwise the call itself writes
    # (marked) or the provider caches for free (automatic).
    named: bool = False
    storage_per_mtok_hour: float = 0.0
    # Anthropic-like breakpoints: the provider reports the tokens each call
    # wrote (usage.cache_write_tokens), billed at this price instead of input.
    write_per_mtok: float | None = None


GEMINI = Shape("gemini", "local-sim-1", "Gemini-like", 0.30, 0.03, 2.50, named=True, storage_per_mtok_hour=1.00)
ANTHROPIC = Shape("anthropic", "local-sim-anthropic-1", "Anthropic-like", 3.00, 0.30, 15.00, write_per_mtok=3.75)
OPENAI = Shape("openai", "local-sim-openai-1", "OpenAI-like", 1.25, 0.125, 10.00)
SHAPES = {s.provider: s for s in (GEMINI, ANTHROPIC, OPENAI)}


@dataclass(frozen=True)
class TurnCost:
    with_cache: float
    without_cache: float


def turn_cost(
    *,
    prompt_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    written_tokens: int,
    cache_ttl_s: float,
    reported_write_tokens: int = 0,
    shape: Shape = GEMINI,
) -> TurnCost:
    """``written_tokens``: a named cache created or grown for this call (its
    tokens are written at the input price once, and stored, counted here
    for its whole TTL: an upper bound). ``reported_write_tokens``: what a
    marked provider says this call wrote, a part of ``prompt_tokens``."""
    output = output_tokens * shape.output_per_mtok
    uncached = prompt_tokens - cached_tokens
    with_cache = uncached * shape.input_per_mtok + cached_tokens * shape.cached_input_per_mtok + output
    if shape.named:
        with_cache += written_tokens * (shape.input_per_mtok + cache_ttl_s / 3600.0 * shape.storage_per_mtok_hour)
    elif shape.write_per_mtok is not None:
        with_cache += reported_write_tokens * (shape.write_per_mtok - shape.input_per_mtok)
    without_cache = prompt_tokens * shape.input_per_mtok + output
    return TurnCost(with_cache / 1_000_000, without_cache / 1_000_000)
