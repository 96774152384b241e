"""What a compactor receives and what it may return.

Compactor input is secret-pruned and clipped like pi's summarizer input:
long strings in tool args and results are cut (the model already acted on
them; the summary needs their gist), inline data becomes a one-line note.
Partial chunks are left out: the events that complete them are there.
The returned summary is checked here, whichever compactor produced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from context_service.domain import parts
from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.sizing import content_size
from context_service.domain.compaction_rules.summary_text import escape_controls
from context_service.domain.model import Content, Event, Part, Usage
from context_service.domain.selection.records import prune_content
from context_service.domain.selection.secrets import DEFAULT_SECRET_KEYS, SecretKeys

CLIP_CHARS = 2_000
# A summary should be much smaller than what it replaces; compactors aim at
# this share of the keep budget, never above max_summary_bytes.
TARGET_SHARE_OF_KEEP = 0.25
MIN_TARGET_BYTES = 2_048


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    session: str
    events: tuple[Event, ...]  # pruned and clipped, oldest first
    previous_summary: str
    instructions: str
    max_summary_bytes: int
    target_summary_bytes: int
    input_bytes: int
    event_sizes: tuple[int, ...] = ()  # input bytes of each event, aligned with ``events``


@dataclass(frozen=True, slots=True)
class Prepared:
    """An event as a compactor sees it (None: nothing to say) and the input
    bytes it takes."""

    event: Event | None
    size: int


@dataclass(frozen=True, slots=True)
class SummaryResult:
    summary: str
    usage: Usage | None = None  # the summarizer's own; never the agent's prompt size


def target_bytes(keep_recent_tokens: int, bytes_per_token: float, max_summary_bytes: int) -> int:
    wanted = max(MIN_TARGET_BYTES, int(keep_recent_tokens * bytes_per_token * TARGET_SHARE_OF_KEEP))
    return min(wanted, max_summary_bytes)


def _clip(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}…[{len(value) - limit} characters clipped]"
    if isinstance(value, dict):
        return {k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip(v, limit) for v in value]
    return value


def _clip_part(p: Part, limit: int) -> Part:
    blob = p.inline_data
    if blob is not None:
        return Part(text=f"[inline data: {blob.mime_type}, {len(blob.data)} bytes]", thought=p.thought)
    # thought signatures are opaque provider bytes; a summarizer has no use for them
    return parts.map_json(p, lambda value: _clip(value, limit), keep_signature=False)


def prepare_for_compactor(e: Event, keys: SecretKeys = DEFAULT_SECRET_KEYS, clip_chars: int = CLIP_CHARS) -> Prepared:
    """The event as a compactor sees it, and its input size."""
    if e.partial or e.is_compaction or e.content is None or not e.content.parts:
        return Prepared(None, 0)
    pruned, _ = prune_content(e.content, keys)
    content = Content(pruned.role, tuple(_clip_part(p, clip_chars) for p in pruned.parts))
    # Usage, cache records, reply metadata and client metadata stay behind:
    # they are not conversation.
    prepared = replace(e, content=content, usage=None, cache=None, custom_metadata=None, finish_reason="",
                       model_version="")
    # Canonical content plus a small allowance for ids and framing.
    return Prepared(prepared, content_size(content) + len(e.id) + len(e.author) + 64)


def build_request(
    session: str,
    prepared: Sequence[Prepared],
    previous_summary: str,
    instructions: str,
    max_summary_bytes: int,
    target_summary_bytes: int,
) -> SummaryRequest:
    kept = [p for p in prepared if p.event is not None]
    size = sum(p.size for p in kept) + len(previous_summary.encode()) + len(instructions.encode())
    return SummaryRequest(
        session,
        tuple(p.event for p in kept if p.event is not None),
        previous_summary,
        instructions,
        max_summary_bytes,
        target_summary_bytes,
        size,
        tuple(p.size for p in kept),
    )


def validate_summary(summary: object, max_bytes: int, compactor: str) -> str:
    """The summary, stripped and with control characters escaped
    (``summary_text``), or a structured error: empty, not text, not
    encodable or over max_bytes (measured after escaping). Idempotent."""
    if not isinstance(summary, str):
        raise errors.summary_malformed(compactor, "not text")
    text = escape_controls(summary.strip())
    if not text:
        raise errors.summary_empty(compactor)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise errors.summary_malformed(compactor, "not valid UTF-8") from None
    if size > max_bytes:
        raise errors.summary_too_large(compactor, size, max_bytes)
    return text
