"""OpenTelemetry traces and metrics, content-free by construction.

Span and metric attributes are limited to counts, sizes, fingerprints, codes,
states and reasons. Trace context crosses processes in gRPC metadata
(W3C traceparent), so one agent turn is one trace across both services.

Exporters: ``none`` (the default: nothing recorded), ``console`` (stdout),
and ``otlp`` (an OpenTelemetry collector over gRPC or HTTP/protobuf, with
TLS, a client certificate and headers as collectors expect). Spans still
queued are flushed when the server stops (``shutdown_telemetry``).
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
from opentelemetry import metrics, propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentctx_common.errors import ConfigError
from agentctx_common.status import WrappingInterceptor, stream_items, wrap_handler

Exporter = Literal["none", "console", "otlp"]


@dataclass(frozen=True)
class OtlpConfig:
    """Where an ``otlp`` exporter sends, as collectors expect it.

    ``endpoint``: ``host:port`` for gRPC (default port 4317), or a base URL
    such as ``https://collector:4318`` for HTTP/protobuf (``/v1/traces`` and
    ``/v1/metrics`` are appended). ``insecure``: plaintext gRPC (a sidecar
    collector); otherwise TLS, verified against ``ca`` (or the system roots),
    with ``cert``/``key`` as the client certificate when the collector wants
    one. ``headers`` are sent with every export (an auth token, a tenant);
    they are never logged.
    """

    endpoint: str = "127.0.0.1:4317"
    protocol: Literal["grpc", "http/protobuf"] = "grpc"
    insecure: bool = False
    ca: pathlib.Path | None = None
    cert: pathlib.Path | None = None
    key: pathlib.Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    metrics_interval_s: float = 60.0


_configured = False


def configure_telemetry(service_name: str, exporter: Exporter = "none", otlp: OtlpConfig | None = None) -> None:
    """Installs SDK providers once per process, unless a test already did.
    Raises ConfigError for an unusable OTLP configuration."""
    global _configured
    if _configured or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    resource = Resource.create({"service.name": service_name})
    if exporter == "none":
        _configured = True
        # Nothing is exported, so record nothing: root spans are not sampled
        # (they still carry trace ids across services), and meters stay the
        # API's no-ops. A caller's sampled trace is still recorded.
        trace.set_tracer_provider(TracerProvider(resource=resource, sampler=ParentBased(ALWAYS_OFF)))
        return
    spans, measures, interval_s = _exporters(exporter, otlp or OtlpConfig())
    _configured = True
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = PeriodicExportingMetricReader(measures, export_interval_millis=interval_s * 1000)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))


def shutdown_telemetry() -> None:
    """Flushes and stops the exporters (queued spans, a last metrics export)."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        shutdown = getattr(provider, "shutdown", None)
        if callable(shutdown):
            shutdown()


def _exporters(exporter: Exporter, otlp: OtlpConfig) -> tuple[SpanExporter, MetricExporter, float]:
    if exporter == "console":
        return ConsoleSpanExporter(), ConsoleMetricExporter(), 60.0
    files = {}
    for name in ("ca", "cert", "key"):
        path = getattr(otlp, name)
        if path is not None:
            try:
                files[name] = pathlib.Path(path).read_bytes()
            except OSError as exc:
                raise ConfigError(f"otlp_{name} {path}: cannot be read ({exc.strerror or exc})") from None
    if ("cert" in files) != ("key" in files):
        raise ConfigError("otlp_cert and otlp_key go together: set both or neither")
    headers = dict(otlp.headers)
    if otlp.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        credentials = None
        if not otlp.insecure:
            credentials = grpc.ssl_channel_credentials(files.get("ca"), files.get("key"), files.get("cert"))
        common: dict[str, Any] = {
            "endpoint": otlp.endpoint, "insecure": otlp.insecure, "credentials": credentials,
            "headers": headers, "timeout": otlp.timeout_s,
        }
        return GrpcSpans(**common), GrpcMetrics(**common), otlp.metrics_interval_s
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

    base = otlp.endpoint.rstrip("/")
    tls: dict[str, Any] = {}
    if otlp.ca is not None:
        tls["certificate_file"] = str(otlp.ca)
    if otlp.cert is not None and otlp.key is not None:
        tls["client_certificate_file"], tls["client_key_file"] = str(otlp.cert), str(otlp.key)
    return (
        HttpSpans(endpoint=f"{base}/v1/traces", headers=headers, timeout=otlp.timeout_s, **tls),
        HttpMetrics(endpoint=f"{base}/v1/metrics", headers=headers, timeout=otlp.timeout_s, **tls),
        otlp.metrics_interval_s,
    )


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
