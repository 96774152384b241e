"""Turn test fixtures: the real cache service and context service in this
process (``tests.support.pair``), and span capture."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import spans
from tests.support.pair import ServicePair, pair_maker

# Small enough that a short conversation is worth caching.
CACHE_DEFAULTS = {"local_min_cache_tokens": 64, "min_prefix_tokens": 64}


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    return spans.span_exporter()


@pytest.fixture
async def pair_factory(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    """``await pair_factory(cache={...}, context={...})``: settings overrides
    for each service."""
    async with pair_maker(certs_dir, tmp_path, cache_defaults=CACHE_DEFAULTS) as make:
        yield make


@pytest.fixture
async def pair(pair_factory: Callable[..., Any]) -> ServicePair:
    return await pair_factory()
