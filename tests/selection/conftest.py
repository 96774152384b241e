"""Selection test fixtures: in-memory telemetry and a real context server.

The global tracer and meter providers can be set once per process; another
area may have set them first, so the exporter is added to whatever SDK
provider is installed, and one is installed only when none is.
"""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentctx.context.v1 import context_service_pb2_grpc
from agentctx_common.certs import SAMPLE_AGENT_ID
from agentctx_common.server import GrpcServer
from context_service.settings import ContextSettings
from tests.support.servers import context_settings, secure_channel, start_context

APP = "app"


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture(scope="session")
def metric_reader() -> InMemoryMetricReader | None:
    """A reader on the global meter provider, or None when another area
    installed its provider first (readers cannot be added later)."""
    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return None
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return reader


@dataclass
class Context:
    stub: context_service_pb2_grpc.ContextServiceStub
    server: GrpcServer
    settings: ContextSettings
    certs: pathlib.Path

    @property
    def db_url(self) -> str:
        return self.settings.resolved_database_url


@pytest.fixture
async def ctx(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Context]:
    # mTLS with the sample agent's certificate, allowed one app only.
    settings = context_settings(
        certs_dir, tmp_path, require_client_cert=True, app_grants={SAMPLE_AGENT_ID: [APP]}, dev_anonymous_apps=[]
    )
    server = await start_context(settings)
    channel = secure_channel(server.port, certs_dir)
    try:
        yield Context(context_service_pb2_grpc.ContextServiceStub(channel), server, settings, certs_dir)
    finally:
        await channel.close()
        await server.stop(None)
