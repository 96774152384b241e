"""Fixtures of the diagnostics tests: the real service pair in this process
(``tests.support.pair``: both on 127.0.0.1, dev mTLS certificates) and span
capture."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import spans
from tests.support.pair import ServicePair, start_pair


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    return spans.span_exporter()


@pytest.fixture
async def pair_factory(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    """``await pair_factory(context={...}, cache={...}, with_cache=True)``;
    without the cache service its port stays closed (unreachable)."""
    made: list[ServicePair] = []

    async def make(*, context: dict[str, Any] | None = None, cache: dict[str, Any] | None = None,
                   with_cache: bool = True) -> ServicePair:
        pair = await start_pair(certs_dir, tmp_path / f"pair{len(made)}", cache=cache,
                                context={"cache_timeout_s": 5.0, **(context or {})}, with_cache=with_cache)
        made.append(pair)
        return pair

    yield make
    for pair in made:
        await pair.close()


@pytest.fixture
async def pair(pair_factory: Callable[..., Any]) -> ServicePair:
    return await pair_factory()
