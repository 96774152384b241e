"""Per-content and per-event records: everything selection needs, computed
once.

Events are immutable once stored, so a record built from one can be cached
for as long as the key set that pruned it stays the same (see
``context_service.building.history``). ``rendered`` is an opaque slot for the
transport's form of the pruned content (a proto Content on the server), so
a response can be assembled from ready-made messages.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from context_service.domain import model as m
from context_service.domain import parts
from context_service.domain.config import ContentType
from context_service.domain.selection.canonical import budget_size, canonical_form
from context_service.domain.selection.secrets import SecretKeys, prune

Render = Callable[[m.Content], Any]

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass(frozen=True, slots=True)
class ContentRecord:
    """One pruned content in canonical form."""

    content: m.Content
    canonical: bytes
    digest: bytes
    size: int
    secrets_pruned: int
    call_ids: tuple[str, ...]
    response_ids: tuple[str, ...]
    rendered: Any = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A stored event as selection sees it. For a COMPACTION event ``body``
    is the summary as it is rendered (one user-role content)."""

    sequence: int
    event_id: str
    author: str
    invocation_id: str
    branch: str
    partial: bool
    final: bool
    create_time: dt.datetime | None
    content_types: frozenset[ContentType]
    body: ContentRecord | None
    prompt_tokens: int = 0
    is_compaction: bool = False
    kept_from: int = 0  # COMPACTION events: the first sequence shown verbatim
    retracts: str = ""  # a retraction: the id of the event it takes back


def prune_content(content: m.Content, keys: SecretKeys) -> tuple[m.Content, int]:
    """``content`` with secret keys dropped from every JSON payload (tool
    call args, tool results), and the number of keys dropped."""
    total = 0
    new_parts: list[m.Part] | None = None

    def pruned(value: m.JsonObject) -> m.JsonObject:
        nonlocal total
        out, n = prune(value, keys)
        total += n
        return out if n else value

    for i, p in enumerate(content.parts):
        new = parts.map_json(p, pruned)
        if new is not p:
            if new_parts is None:
                new_parts = list(content.parts)
            new_parts[i] = new
    if new_parts is None:
        return content, 0
    return m.Content(content.role, tuple(new_parts)), total


def content_record(content: m.Content, keys: SecretKeys, render: Render | None = None) -> ContentRecord:
    pruned, count = prune_content(content, keys)
    canonical, digest = canonical_form(pruned)
    return ContentRecord(
        content=pruned,
        canonical=canonical,
        digest=digest,
        size=budget_size(pruned, canonical),
        secrets_pruned=count,
        call_ids=tuple(fc.id for fc in pruned.function_calls),
        response_ids=tuple(fr.id for fr in pruned.function_responses),
        rendered=render(pruned) if render is not None else None,
    )


# Each Part kind's content type, by the kind's index (a thought part is THOUGHT
# instead of TEXT, and THOUGHT besides its kind otherwise).
_KIND_TYPES = tuple(ContentType(k.name.upper()) for k in parts.KINDS)


def content_types(content: m.Content | None) -> frozenset[ContentType]:
    if content is None:
        return frozenset()
    types = set()
    for p in content.parts:
        kind = parts.kind_of(p)
        if p.thought:
            types.add(ContentType.THOUGHT)
            if kind is not None and kind.fields:
                types.add(_KIND_TYPES[kind.index])
        elif kind is not None:
            types.add(_KIND_TYPES[kind.index])
    return frozenset(types)


def is_final(event: m.Event) -> bool:
    """ADK's notion of a final event, plus tool results: it ends a turn, or
    it is a complete event without a pending tool call."""
    if event.turn_complete:
        return True
    if event.partial:
        return False
    content = event.content
    if content is None:
        return True
    return bool(content.function_responses) or not content.function_calls


def summary_content(summary: str) -> m.Content:
    return m.Content("user", (m.Part(text=SUMMARY_PREFIX + summary),))


def _aware(t: dt.datetime | None) -> dt.datetime | None:
    # Storage may hand back naive UTC times; filters compare with aware ones.
    return t.replace(tzinfo=dt.UTC) if t is not None and t.tzinfo is None else t


def event_record(event: m.Event, keys: SecretKeys, render: Render | None = None) -> EventRecord:
    if event.is_compaction and event.compaction is not None:
        c = event.compaction
        return EventRecord(
            sequence=event.sequence,
            event_id=event.id,
            author=event.author,
            invocation_id=event.invocation_id,
            branch=event.branch,
            partial=False,
            final=True,
            create_time=_aware(event.create_time),
            content_types=frozenset({ContentType.TEXT}),
            body=content_record(summary_content(c.summary), keys, render),
            is_compaction=True,
            kept_from=c.first_kept_sequence if c.first_kept_sequence > 0 else c.end_sequence + 1,
        )
    usage = event.usage
    return EventRecord(
        sequence=event.sequence,
        event_id=event.id,
        author=event.author,
        invocation_id=event.invocation_id,
        branch=event.branch,
        partial=event.partial,
        final=is_final(event),
        create_time=_aware(event.create_time),
        content_types=content_types(event.content),
        body=content_record(event.content, keys, render) if event.content is not None and event.content.parts else None,
        prompt_tokens=usage.prompt_tokens if usage is not None and _is_reply(event) else 0,
        retracts=event.retracts_event_id,
    )


def _is_reply(event: m.Event) -> bool:
    return event.content is not None and event.content.role == "model" and not event.partial
