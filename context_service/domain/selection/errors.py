"""The errors selection raises, with their ErrorInfo reasons. Metadata holds
figures only (sizes, limits, the estimate's ratio), never content."""

from __future__ import annotations

from collections.abc import Iterable

from agentctx_common.errors import FieldViolation, ResourceExhausted, Unimplemented
from agentctx_common.reasons import Reason

_PREFIXES = {"request": "max_request_", "attachment": "max_attachment_"}


def _limit_name(kind: str, measured_bytes: int, max_bytes: int | None) -> str:
    prefix = _PREFIXES.get(kind, "max_")
    if max_bytes is not None and measured_bytes > max_bytes:
        return prefix + "bytes"
    return prefix + "tokens"


def budget_exceeded(
    reason: Reason,
    message: str,
    *,
    kind: str,
    measured_bytes: int,
    measured_tokens: int,
    max_bytes: int | None,
    max_tokens: int | None,
    bytes_per_token: float,
    field_violations: Iterable[FieldViolation] = (),
) -> ResourceExhausted:
    """``kind`` is "history" (max_bytes/max_tokens), "request"
    (max_request_bytes/max_request_tokens) or "attachment"
    (max_attachment_bytes/max_attachment_tokens)."""
    metadata: dict[str, object] = {
        "limit": _limit_name(kind, measured_bytes, max_bytes),
        "measured_bytes": measured_bytes,
        "measured_tokens": measured_tokens,
        "bytes_per_token": f"{bytes_per_token:.4g}",
    }
    if max_bytes is not None:
        metadata["allowed_bytes"] = max_bytes
    if max_tokens is not None:
        metadata["allowed_tokens"] = max_tokens
    return ResourceExhausted(message, reason=reason, metadata=metadata, field_violations=field_violations)


def compress_not_available() -> Unimplemented:
    return Unimplemented(
        "overflow mode COMPRESS is not available yet: it arrives with compaction; use TRUNCATE or ERROR",
        reason=Reason.COMPRESS_NOT_AVAILABLE,
    )
