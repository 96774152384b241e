"""Token estimates for compaction, sized exactly as selection sizes history
(canonical JSON, inline data at its raw length, bytes / bytes_per_token), so
"the kept tail fits keep_recent_tokens" means the same to both areas.

``measure`` does the costly part (canonical JSON) once per event and keeps
its digest for the source fingerprint; callers that must stay responsive
measure in slices and pass the measures on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from context_service.domain.model import Content, Event
from context_service.domain.selection.canonical import budget_size, peek_bytes, peek_digest
from context_service.domain.selection.records import summary_content
from context_service.domain.selection.tokens import estimate as estimate_tokens

__all__ = [
    "Measure", "content_size", "estimate_tokens", "event_tokens", "measure", "measure_all", "summary_tokens", "tokens",
]

_EMPTY_DIGEST = hashlib.sha256(b"null").digest()


@dataclass(frozen=True, slots=True)
class Measure:
    size: int  # budget bytes of the content
    digest: bytes  # SHA-256 of its canonical JSON
    counted: bool  # False for partial chunks and compaction entries: built contexts leave them out


def content_size(c: Content | None) -> int:
    if c is None or not c.parts:
        return 0
    return budget_size(c, peek_bytes(c))


def measure(e: Event) -> Measure:
    counted = not (e.partial or e.is_compaction)
    if e.content is None:
        return Measure(0, _EMPTY_DIGEST, counted)
    canonical = peek_bytes(e.content)
    size = budget_size(e.content, canonical) if e.content.parts else 0
    return Measure(size, peek_digest(e.content, canonical), counted)


def measure_all(events: Sequence[Event]) -> tuple[Measure, ...]:
    return tuple(measure(e) for e in events)


def tokens(m: Measure, bytes_per_token: float) -> int:
    """Estimated tokens an event adds to a request; a summary is counted
    once, as the summary."""
    return estimate_tokens(m.size, bytes_per_token) if m.counted else 0


def event_tokens(e: Event, bytes_per_token: float) -> int:
    return tokens(measure(e), bytes_per_token)


def summary_tokens(summary: str, bytes_per_token: float) -> int:
    """Tokens of a summary as built contexts render it."""
    return estimate_tokens(content_size(summary_content(summary)), bytes_per_token) if summary else 0
