"""OpenTelemetry traces and metrics, content-free by construction.

Span and metric attributes are limited to counts, sizes, fingerprints, codes,
states and reasons. Trace context crosses processes in gRPC metadata
(W3C traceparent), so one agent turn is one trace across both services.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import grpc
from opentelemetry import metrics, propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentctx_common.status import WrappingInterceptor, stream_items, wrap_handler

_configured = False


def configure_telemetry(service_name: str, exporter: str = "none") -> None:
    """Installs SDK providers once per process, unless a test already did."""
    global _configured
    if _configured or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    _configured = True
    resource = Resource.create({"service.name": service_name})
    if exporter == "none":
        # Nothing is exported, so record nothing: root spans are not sampled
        # (they still carry trace ids across services), and meters stay the
        # API's no-ops. A caller's sampled trace is still recorded.
        trace.set_tracer_provider(TracerProvider(resource=resource, sampler=ParentBased(ALWAYS_OFF)))
        return
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))


def outgoing_metadata(extra: Sequence[tuple[str, str]] = ()) -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying the current trace context, plus ``extra``."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(carrier.items()) + tuple(extra)


class TracingInterceptor(WrappingInterceptor):
    """One SERVER span per RPC, parented by the caller's trace context, and
    an RPC duration histogram. Attributes: method and status code only."""

    def __init__(self, service_name: str) -> None:
        super().__init__()
        self._tracer = trace.get_tracer(f"agentctx.{service_name}")
        meter = metrics.get_meter(f"agentctx.{service_name}")
        self._duration = meter.create_histogram("rpc.server.duration", unit="ms")

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        span_name = method.lstrip("/")
        service, _, name = span_name.rpartition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}
        tracer, finish = self._tracer, self._finish

        def start(context: grpc.aio.ServicerContext) -> Any:
            carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
            return tracer.start_as_current_span(
                span_name, context=propagate.extract(carrier), kind=SpanKind.SERVER, attributes=attributes,
                record_exception=False, set_status_on_exception=False,
            )

        def wrap(behavior: Any) -> Any:
            if handler.response_streaming:

                async def streaming(request: Any, context: grpc.aio.ServicerContext) -> Any:
                    started = time.perf_counter()
                    with start(context) as span:
                        try:
                            async for item in stream_items(behavior, request, context):
                                yield item
                        finally:
                            finish(span, context, started, attributes)

                return streaming

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                started = time.perf_counter()
                with start(context) as span:
                    try:
                        return await behavior(request, context)
                    finally:
                        finish(span, context, started, attributes)

            return unary

        return wrap_handler(handler, wrap)

    def _finish(self, span: trace.Span, context: grpc.aio.ServicerContext, started: float, attributes: dict) -> None:
        code = _code_of(context)
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        if code is not grpc.StatusCode.OK:
            span.set_status(Status(StatusCode.ERROR, code.name))
        self._duration.record(
            (time.perf_counter() - started) * 1000, {**attributes, "rpc.grpc.status_code": code.value[0]}
        )


def _code_of(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    try:
        code = context.code()
    except Exception:  # noqa: BLE001 - older grpc versions lack code()
        return grpc.StatusCode.UNKNOWN
    if code is None:
        return grpc.StatusCode.OK
    if isinstance(code, grpc.StatusCode):
        return code
    for candidate in grpc.StatusCode:
        if candidate.value[0] == code:
            return candidate
    return grpc.StatusCode.UNKNOWN
