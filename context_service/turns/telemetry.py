"""Turn spans, metrics and logs: counts, token figures, cache states,
fingerprints and error reasons. Never content, prompts, tool arguments,
leases or provider resource names: every attribute is a number, a boolean
or an enum-like name.

The ``turn`` span sits under the RPC's server span; the cache service's
spans join the same trace through the metadata every cache call carries.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager

from opentelemetry import metrics, trace
from opentelemetry.trace import Span

from agentctx_common.errors import AgentCtxError
from agentctx_common.spans import recording_span
from context_service.turns.types import TurnResult

log = logging.getLogger("agentctx.context.turns")
_tracer = trace.get_tracer("agentctx.context.turns")
_meter = metrics.get_meter("agentctx.context.turns")
_turns = _meter.create_counter("agentctx.turns", description="Agent turns, by outcome and cache state.")
_prompt_tokens = _meter.create_counter("agentctx.turns.prompt_tokens", unit="{token}")
_cached_tokens = _meter.create_counter("agentctx.turns.cached_tokens", unit="{token}")


def turn_span(*, stream: bool, inputs: int) -> AbstractContextManager[Span]:
    """The ``turn`` span; an AgentCtxError leaving it is recorded by code
    and reason only (messages may name sizes, never content)."""

    def failed(err: AgentCtxError) -> None:
        _turns.add(1, {"outcome": err.reason, "stream": stream})
        log.warning("turn failed", extra={"code": err.code.value, "reason": err.reason, "stream": stream})

    return recording_span(_tracer, "turn", {"turn.stream": stream, "turn.inputs": inputs}, on_error=failed)


def completed(
    span: Span, result: TurnResult, *, stream: bool, overflow_recovered: bool = False, chunks: int = 0
) -> None:
    reply, deduplicated = result.reply, result.deduplicated
    cache = reply.cache
    usage = reply.usage
    figures: dict[str, str | int | bool] = {
        "turn.deduplicated": deduplicated,
        "turn.reply_sequence": reply.sequence,
        "turn.tool_calls": len(reply.content.function_calls) if reply.content is not None else 0,
        "turn.compactions": len(result.compactions),
        "turn.overflow_recovered": overflow_recovered,
        "turn.background_compaction": result.background_scheduled,
        "turn.chunks": chunks,
        "cache.state": cache.state.value if cache is not None else "UNSPECIFIED",
        "cache.bypass_reason": cache.bypass_reason if cache is not None else "UNSPECIFIED",
        "cache.prefix_fingerprint": cache.prefix_fingerprint if cache is not None else "",
        "usage.prompt_tokens": usage.prompt_tokens if usage is not None else 0,
        "usage.cached_prompt_tokens": usage.cached_prompt_tokens if usage is not None else 0,
        "usage.output_tokens": usage.output_tokens if usage is not None else 0,
    }
    span.set_attributes(figures)
    outcome = "DEDUPLICATED" if deduplicated else "OK"
    _turns.add(1, {"outcome": outcome, "stream": stream, "cache_state": str(figures["cache.state"])})
    if not deduplicated and usage is not None:
        _prompt_tokens.add(usage.prompt_tokens)
        _cached_tokens.add(usage.cached_prompt_tokens)
    log.info("turn", extra={k.replace(".", "_"): v for k, v in figures.items()})
