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
from tests.support.pair import ServicePair, pair_maker


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    return spans.span_exporter()


@pytest.fixture
async def pair_factory(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    """``await pair_factory(context={...}, cache={...}, with_cache=True)``;
    without the cache service its port stays closed (unreachable)."""
    async with pair_maker(certs_dir, tmp_path, context_defaults={"cache_timeout_s": 5.0}) as make:
        yield make


@pytest.fixture
async def pair(pair_factory: Callable[..., Any]) -> ServicePair:
    return await pair_factory()
