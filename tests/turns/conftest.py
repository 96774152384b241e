"""Turn test fixtures: the real cache service and context service in this
process (``tests.support.pair``), and span capture."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import spans
from tests.support.pair import ServicePair, start_pair

# Small enough that a short conversation is worth caching.
CACHE_DEFAULTS = {"local_min_cache_tokens": 64, "min_prefix_tokens": 64}


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    return spans.span_exporter()


@pytest.fixture
async def pair_factory(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    """``await pair_factory(cache={...}, context={...})``: settings overrides
    for each service."""
    made: list[ServicePair] = []

    async def make(*, cache: dict[str, Any] | None = None, context: dict[str, Any] | None = None,
                   with_cache: bool = True) -> ServicePair:
        pair = await start_pair(certs_dir, tmp_path / f"pair-{len(made)}", cache={**CACHE_DEFAULTS, **(cache or {})},
                                context=context, with_cache=with_cache)
        made.append(pair)
        return pair

    yield make
    for pair in made:
        await pair.close()


@pytest.fixture
async def pair(pair_factory: Callable[..., Any]) -> ServicePair:
    return await pair_factory()
