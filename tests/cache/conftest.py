"""Fixtures of the cache service tests: a manual clock, a registry over the
real local simulator and a real journal file, real servers with the dev
mTLS certificates, and span capture that cooperates with other modules."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import ManualClock
from cache_service.domain.policy import PolicySettings
from cache_service.domain.registry import Registry, RegistrySettings
from cache_service.journal import FileJournal
from cache_service.providers.local import LocalProvider
from tests.cache.support import Harness


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    """Every span this process ends from now on. The global tracer provider
    can be set once per process: install one if nobody has, else attach to
    the SDK provider already installed."""
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        current = trace.get_tracer_provider()
    assert isinstance(current, TracerProvider), "a non-SDK tracer provider is installed"
    current.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def harness_factory(tmp_path: pathlib.Path, clock: ManualClock) -> AsyncIterator[Callable[..., Any]]:
    """``await harness_factory(**registry settings)``: a registry over a
    local simulator (minimum cache size 64 tokens) and a journal in tmp_path."""
    made: list[Harness] = []

    async def make(*, min_cache_tokens: int = 64, policy: PolicySettings | None = None, **overrides: Any) -> Harness:
        provider = LocalProvider(clock=clock, min_cache_tokens=min_cache_tokens)
        journal = await FileJournal.open(tmp_path / f"data-{len(made)}")
        providers = {"local": provider}
        janitor = Janitor(providers, journal, workers=2, delete_timeout_s=1.0, attempts=2, backoff_s=0.01)
        janitor.start()
        settings = RegistrySettings(policy=policy or PolicySettings(min_prefix_tokens=64), **overrides)
        registry = Registry(providers, journal, janitor, clock, settings)
        h = Harness(registry, provider, journal, janitor, clock)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.close()


@pytest.fixture
async def harness(harness_factory: Callable[..., Any]) -> Harness:
    return await harness_factory()
