"""Span helpers shared by the domain telemetry modules (no gRPC import, so
pure domain code may use them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode, Tracer

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


@contextmanager
def recording_span(
    tracer: Tracer,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    with_figures: bool = False,
    on_error: Callable[[AgentCtxError], None] | None = None,
) -> Iterator[Span]:
    """A current span that records an AgentCtxError leaving it with
    ``mark_error`` (then ``on_error``), and never an exception's text."""
    with tracer.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except AgentCtxError as err:
            mark_error(span, err, with_figures=with_figures)
            if on_error is not None:
                on_error(err)
            raise
