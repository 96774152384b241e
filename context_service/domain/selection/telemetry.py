"""Spans and metrics for context builds: counts, sizes, token estimates,
fingerprints, modes and error reasons. Never content, argument values,
pruned keys or resource names: every attribute below is a number, a
fingerprint or an enum name.

Spans: ``context.build`` (the whole build) with a child ``context.envelope``
(the request accounting). Metrics: ``agentctx.context.builds`` (count, by
outcome), ``agentctx.context.request.bytes`` / ``.tokens`` and
``agentctx.context.history.bytes`` (histograms).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry import metrics, trace
from opentelemetry.trace import Span

from agentctx_common.spans import recording_span
from context_service.domain.config import SelectionPolicy
from context_service.domain.selection.envelope import Accounting

_tracer = trace.get_tracer("agentctx.context.selection")
_meter = metrics.get_meter("agentctx.context.selection")
_builds = _meter.create_counter("agentctx.context.builds", description="Context builds, by outcome.")
_request_bytes = _meter.create_histogram("agentctx.context.request.bytes", unit="By")
_request_tokens = _meter.create_histogram("agentctx.context.request.tokens", unit="{token}")
_history_bytes = _meter.create_histogram("agentctx.context.history.bytes", unit="By")


def build_span(policy: SelectionPolicy) -> AbstractContextManager[Span]:
    """The ``context.build`` span; an AgentCtxError leaving it is recorded
    by code and reason only (its message may name sizes, never content)."""
    attributes = {"context.overflow": policy.overflow.value, "context.filtered": policy.filter is not None}
    return recording_span(_tracer, "context.build", attributes,
                          on_error=lambda err: _builds.add(1, {"outcome": err.reason}))


def envelope_span() -> AbstractContextManager[Span]:
    return recording_span(_tracer, "context.envelope", with_figures=True)


def record(build: Span, envelope: Span, a: Accounting) -> None:
    _builds.add(1, {"outcome": "OK"})
    _request_bytes.record(a.request.bytes)
    _request_tokens.record(a.request.tokens)
    _history_bytes.record(a.history.bytes)
    if not build.is_recording():
        return
    build.set_attributes({
        "context.events_seen": a.events_seen,
        "context.events_filtered": a.events_filtered,
        "context.events_selected": a.events_selected,
        "context.units_selected": a.units_selected,
        "context.units_dropped": a.units_dropped,
        "context.secrets_pruned": a.secrets_pruned,
        "context.history_bytes": a.history.bytes,
        "context.history_tokens": a.history.tokens,
        "context.bytes_per_token": a.bytes_per_token,
        "context.calibrated": a.calibrated,
        "context.compressed": a.compressed,
        "context.compaction_sequence": a.compaction_sequence,
        "context.last_sequence": a.last_sequence,
        "context.selection_fingerprint": a.selection_fingerprint,
    })
    sections = ("instructions", "settings", "history", "memory", "input", "attachments", "tools", "framing", "request")
    attributes: dict[str, str | int] = {}
    for name in sections:
        section = getattr(a, name)
        attributes[f"envelope.{name}_bytes"] = section.bytes
        attributes[f"envelope.{name}_tokens"] = section.tokens
    attributes["envelope.prefix_fingerprint"] = a.prefix_fingerprint
    attributes["envelope.envelope_fingerprint"] = a.envelope_fingerprint
    envelope.set_attributes(attributes)
