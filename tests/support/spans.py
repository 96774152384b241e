"""Span capture that cooperates across test areas: the global tracer
provider can be set once per process, so an SDK provider is installed only
when none is, and each caller adds its own in-memory exporter to it."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def span_exporter() -> InMemorySpanExporter:
    """A new exporter receiving every span this process ends from now on."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "a non-SDK tracer provider is installed"
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter
