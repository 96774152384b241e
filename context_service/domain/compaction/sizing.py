"""Token estimates for compaction, sized exactly as selection sizes history
(canonical JSON, inline data at its raw length, bytes / bytes_per_token), so
"the kept tail fits keep_recent_tokens" means the same to both areas."""

from __future__ import annotations

from context_service.domain.model import Content, Event
from context_service.domain.selection.canonical import budget_size, content_bytes
from context_service.domain.selection.records import summary_content
from context_service.domain.selection.tokens import estimate as estimate_tokens

__all__ = ["content_size", "estimate_tokens", "event_tokens", "summary_tokens"]


def content_size(c: Content | None) -> int:
    if c is None or not c.parts:
        return 0
    return budget_size(c, content_bytes(c))


def event_tokens(e: Event, bytes_per_token: float) -> int:
    """Estimated tokens the event adds to a request. Partial chunks and
    compaction entries add none here: built contexts leave chunks out, and a
    summary is counted once, as the summary."""
    if e.partial or e.is_compaction:
        return 0
    return estimate_tokens(content_size(e.content), bytes_per_token)


def summary_tokens(summary: str, bytes_per_token: float) -> int:
    """Tokens of a summary as built contexts render it."""
    return estimate_tokens(content_size(summary_content(summary)), bytes_per_token) if summary else 0
