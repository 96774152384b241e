"""Spans, metrics and logs of a build carry counts, sizes and fingerprints
only: no event text, argument value or pruned secret, anywhere."""

from __future__ import annotations

import logging

import grpc
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from tests.selection.conftest import Context
from tests.selection.test_build_context_rpc import SESSION, append, call, create, result, text

SENSITIVE = [
    "CONFIDENTIAL-USER-TEXT", "ARG-VALUE-42", "RESULT-VALUE-99", "sk-PRUNED-SECRET", "MEMORY-TEXT",
    "SYSTEM-TEXT", "INPUT-TEXT", "super_private_key_name",
]


def _strings(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_strings(v) for v in value)
    return str(value)


async def test_no_content_reaches_spans_metrics_or_logs(
    ctx: Context,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Our loggers at DEBUG; third-party ones at the production level (aiosqlite
    # logs SQL parameters at DEBUG, see the report).
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="agentctx")
    await create(ctx)
    await append(ctx, text("user", "CONFIDENTIAL-USER-TEXT"))
    await append(ctx, call("c1", {"q": "ARG-VALUE-42", "api_key": "sk-PRUNED-SECRET", "super_private_key_name": 1}))
    await append(ctx, result("c1", {"rows": "RESULT-VALUE-99", "token": "sk-PRUNED-SECRET"}))
    span_exporter.clear()
    policy = policy_pb2.SelectionPolicy(extra_secret_keys=["super_private_key_name"])
    request = pb.BuildContextRequest(
        session=SESSION, input=[text("user", "INPUT-TEXT")], memory=[text("user", "MEMORY-TEXT")],
        system_instruction=text("user", "SYSTEM-TEXT"), policy=policy,
    )
    reply = await ctx.stub.BuildContext(request)
    assert reply.accounting.secrets_pruned == 3
    with pytest.raises(grpc.aio.AioRpcError):  # a failing build is recorded too
        await ctx.stub.BuildContext(pb.BuildContextRequest(
            session=SESSION, input=[text("user", "INPUT-TEXT")],
            policy=policy_pb2.SelectionPolicy(max_request_bytes=10),
        ))

    spans = span_exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names.count("context.build") == 2 and names.count("context.envelope") == 2
    build = next(s for s in spans if s.name == "context.build" and s.status.is_ok)
    assert build.attributes["context.events_selected"] == 3
    assert build.attributes["context.selection_fingerprint"] == reply.accounting.selection_fingerprint
    envelope = next(s for s in spans if s.name == "context.envelope" and s.status.is_ok)
    assert envelope.attributes["envelope.request_bytes"] == reply.accounting.request.bytes
    failed = next(s for s in spans if s.name == "context.envelope" and not s.status.is_ok)
    assert failed.attributes["error.reason"] == "REQUEST_CONTEXT_BUDGET_EXCEEDED"

    exported = []
    for span in spans:
        exported += [span.name, *(f"{k}={_strings(v)}" for k, v in (span.attributes or {}).items())]
        for event in span.events:
            exported += [event.name, *(f"{k}={_strings(v)}" for k, v in (event.attributes or {}).items())]
        exported.append(str(span.status.description))
    if metric_reader is not None:
        data = metric_reader.get_metrics_data()
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    exported.append(metric.name)
                    for point in metric.data.data_points:
                        exported += [f"{k}={v}" for k, v in point.attributes.items()]
        assert any("agentctx.context.builds" in line for line in exported)
    for record in caplog.records:
        exported.append(record.getMessage())
        exported += [f"{k}={v}" for k, v in record.__dict__.items() if k not in ("msg", "args")]
    blob = "\n".join(exported)
    assert "context.build" in blob
    for needle in SENSITIVE:
        assert needle not in blob, needle
