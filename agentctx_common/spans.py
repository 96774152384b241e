"""Span helpers shared by the domain telemetry modules (no gRPC import, so
pure domain code may use them)."""

from __future__ import annotations

from opentelemetry.trace import Span, Status, StatusCode

from agentctx_common.errors import AgentCtxError


def mark_error(span: Span, err: AgentCtxError, *, with_figures: bool = False) -> None:
    """Records ``err`` on ``span`` by code and reason only: an error's message
    may name sizes, never content, but only its metadata figures are meant
    for telemetry (``with_figures``)."""
    attributes: dict[str, str] = {"error.code": err.code.value, "error.reason": err.reason}
    if with_figures:
        attributes.update({f"error.{k}": v for k, v in err.metadata.items()})
    span.set_attributes(attributes)
    span.set_status(Status(StatusCode.ERROR, err.reason))
