"""Telemetry that leaves the process: both services export spans and
metrics over OTLP to an in-process collector. One Generate is one trace
across both services, and no attribute anywhere holds content, a secret or
a provider resource name."""

from __future__ import annotations

import concurrent.futures
import pathlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from tests.e2e.conftest import CACHE_DEFAULTS
from tests.e2e.processes import ServiceProcesses
from tests.turns.builders import Agent, create_session

PROMPT = "otlp-canary-7d1f: what is the weather in Paris?"


class Collector(trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer):
    """The two OTLP export services, keeping what they receive."""

    def __init__(self) -> None:
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
            self.traces.append(request)
            return trace_service_pb2.ExportTraceServiceResponse()
        self.metrics.append(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def spans(self) -> Iterator[tuple[str, Any]]:
        """(service.name, span) for every span received."""
        for request in self.traces:
            for resource_spans in request.resource_spans:
                service = _attribute(resource_spans.resource.attributes, "service.name")
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        yield service, span

    def metric_names(self) -> set[str]:
        return {
            metric.name
            for request in self.metrics
            for resource_metrics in request.resource_metrics
            for scope in resource_metrics.scope_metrics
            for metric in scope.metrics
        }


def _attribute(attributes: Any, key: str) -> str:
    for kv in attributes:
        if kv.key == key:
            return kv.value.string_value
    return ""


def _values(value: common_pb2.AnyValue) -> Iterator[str]:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        for v in value.array_value.values:
            yield from _values(v)
    elif kind == "kvlist_value":
        for kv in value.kvlist_value.values:
            yield kv.key
            yield from _values(kv.value)
    elif kind is not None:
        yield str(getattr(value, kind))


@pytest.fixture
def collector() -> Iterator[tuple[Collector, int]]:
    """On threads of its own: the test's loop blocks while the services stop
    (and flush), and the collector must answer then."""
    sink = Collector()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(sink, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield sink, port
    server.stop(None)


async def test_one_generate_is_one_trace_across_both_services_and_content_free(
    collector: tuple[Collector, int], certs_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    sink, port = collector
    otlp = {"telemetry_exporter": "otlp", "otlp_endpoint": f"127.0.0.1:{port}", "otlp_insecure": True,
            "metrics_export_interval_s": 0.5, "otlp_headers": {"x-tenant": "agentctx-test"}}
    pair = ServiceProcesses(certs_dir, tmp_path, context=otlp, cache={**CACHE_DEFAULTS, **otlp}).start()
    try:
        async with pair.channel() as channel:
            stub = pair.stub(channel)
            session = await create_session(stub)
            agent = Agent(stub, session.name)
            for _ in range(3):
                await agent.turn(PROMPT)
            compacted = await stub.CompactSession(pb.CompactSessionRequest(
                session=session.name, policy=policy_pb2.CompactionPolicy(keep_recent_tokens=1),
            ))
            assert compacted.compacted
    finally:
        pair.stop()  # SIGTERM: each service flushes its exporters before it exits

    spans = list(sink.spans())
    by_trace: dict[bytes, set[str]] = defaultdict(set)
    names: dict[str, set[str]] = defaultdict(set)
    for service, span in spans:
        by_trace[span.trace_id].add(service)
        names[service].add(span.name)
    assert "agentctx.context.v1.ContextService/Generate" in names["agentctx-context"]
    assert "agentctx.cache.v1.CacheService/GenerateContent" in names["agentctx-cache"]
    generate_traces = {
        span.trace_id for service, span in spans if span.name == "agentctx.context.v1.ContextService/Generate"
    }
    assert generate_traces and all(by_trace[t] == {"agentctx-context", "agentctx-cache"} for t in generate_traces)

    # RPC latency, cache states, tokens cached and compactions.
    assert {"rpc.server.duration", "agentctx.cache.acquires", "agentctx.turns.cached_tokens",
            "agentctx.compaction.runs"} <= sink.metric_names()

    texts = [
        text
        for _, span in spans
        for attributes in (span.attributes, *(event.attributes for event in span.events))
        for kv in attributes
        for text in (kv.key, *_values(kv.value))
    ]
    texts += [
        text
        for request in sink.metrics
        for rm in request.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for point in (*metric.sum.data_points, *metric.histogram.data_points, *metric.gauge.data_points)
        for kv in point.attributes
        for text in (kv.key, *_values(kv.value))
    ]
    assert texts
    leaks = [t for t in texts if "otlp-canary" in t or "cachedContents/" in t or agent.secret in t or "Paris" in t]
    assert not leaks, leaks
