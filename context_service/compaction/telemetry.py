"""Compaction spans, metrics and logs: triggers, counts, sizes, codes and
outcomes only; never summaries, events, prompts or compactor addresses."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import metrics, trace

tracer = trace.get_tracer("agentctx.compaction")
log = logging.getLogger("agentctx.compaction")
_meter = metrics.get_meter("agentctx.compaction")
_runs = _meter.create_counter("agentctx.compaction.runs", description="Compactions by trigger and outcome")
_summary_bytes = _meter.create_histogram("agentctx.compaction.summary_bytes", unit="By")
_summarizer_tokens = _meter.create_counter(
    "agentctx.compaction.summarizer_tokens", description="Tokens summarizers used (apart from agent prompts)"
)


def record(trigger: str, compactor: str, outcome: str, **figures: Any) -> None:
    attributes = {"trigger": trigger, "compactor": compactor, "outcome": outcome}
    _runs.add(1, attributes)
    if figures.get("summary_bytes"):
        _summary_bytes.record(figures["summary_bytes"], {"compactor": compactor})
    if figures.get("summarizer_tokens"):
        _summarizer_tokens.add(figures["summarizer_tokens"], {"compactor": compactor})
    span = trace.get_current_span()
    for name, value in {**attributes, **figures}.items():
        span.set_attribute(f"compaction.{name}", value)
    log.info("compaction", extra={"compaction_" + k: v for k, v in {**attributes, **figures}.items()})
