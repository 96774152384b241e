"""The versioned, JSON-safe checkpoint committed with every summary, the
source fingerprint it carries, and the JSON form of a compaction body.

The checkpoint holds identifiers, fingerprints and counts only (erlang_adk's
fields), so diagnostics can show it without showing content.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

from agentctx_common.canonical import canonical_json
from context_service.domain.compaction import errors
from context_service.domain.model import Checkpoint, Compaction, CompactionTrigger, Event, Usage
from context_service.domain.selection.canonical import content_bytes

SCHEMA_VERSION = 1


def source_fingerprint(events: Sequence[Event], previous_summary: str) -> str:
    """SHA-256 over the summarized events (ids, sequences, canonical content)
    and the summary folded in. Equal fingerprints mean the same source."""
    h = hashlib.sha256()
    h.update(canonical_json({"schema": SCHEMA_VERSION, "previousSummary": previous_summary}))
    for e in events:
        body = content_bytes(e.content) if e.content is not None else b"null"
        h.update(canonical_json([e.id, e.sequence, e.author, e.partial]))
        h.update(hashlib.sha256(body).digest())
    return h.hexdigest()


def _time(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
    return aware.astimezone(dt.timezone.utc).isoformat()


def _parse_time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def checkpoint_to_json(c: Checkpoint) -> dict[str, Any]:
    return {
        "schema_version": c.schema_version,
        "checkpoint_id": c.checkpoint_id,
        "trigger": c.trigger.value,
        "compactor": c.compactor,
        "source": {
            "event_count": c.source_event_count,
            "first_event_id": c.source_first_event_id,
            "last_event_id": c.source_last_event_id,
            "first_time": _time(c.source_first_time),
            "last_time": _time(c.source_last_time),
            "fingerprint": c.source_fingerprint,
        },
        "retained_event_count": c.retained_event_count,
        "retained_user_turns": c.retained_user_turns,
        "retained_tokens": c.retained_tokens,
        "summary_bytes": c.summary_bytes,
    }


def checkpoint_from_json(d: dict[str, Any]) -> Checkpoint:
    """Reads any schema version this code knows; unknown keys written by a
    newer version are ignored rather than failing reads."""
    source = d.get("source") or {}
    return Checkpoint(
        schema_version=int(d.get("schema_version", SCHEMA_VERSION)),
        checkpoint_id=str(d.get("checkpoint_id", "")),
        trigger=CompactionTrigger(d.get("trigger", "UNSPECIFIED")),
        source_event_count=int(source.get("event_count", 0)),
        source_first_event_id=str(source.get("first_event_id", "")),
        source_last_event_id=str(source.get("last_event_id", "")),
        source_first_time=_parse_time(source.get("first_time")),
        source_last_time=_parse_time(source.get("last_time")),
        source_fingerprint=str(source.get("fingerprint", "")),
        retained_event_count=int(d.get("retained_event_count", 0)),
        summary_bytes=int(d.get("summary_bytes", 0)),
        retained_user_turns=int(d.get("retained_user_turns", 0)),
        compactor=str(d.get("compactor", "")),
        retained_tokens=int(d.get("retained_tokens", 0)),
    )


def check_checkpoint_size(c: Checkpoint, limit: int) -> None:
    size = len(canonical_json(checkpoint_to_json(c)))
    if size > limit:
        raise errors.checkpoint_too_large(size, limit)


def _usage_json(u: Usage | None) -> dict[str, int] | None:
    if u is None:
        return None
    return {
        "prompt_tokens": u.prompt_tokens,
        "cached_prompt_tokens": u.cached_prompt_tokens,
        "output_tokens": u.output_tokens,
        "thoughts_tokens": u.thoughts_tokens,
        "total_tokens": u.total_tokens,
    }


def compaction_to_json(c: Compaction) -> dict[str, Any]:
    """The body of a COMPACTION event as stored."""
    return {
        "start_sequence": c.start_sequence,
        "end_sequence": c.end_sequence,
        "first_kept_event_id": c.first_kept_event_id,
        "first_kept_sequence": c.first_kept_sequence,
        "summary": c.summary,
        "checkpoint": checkpoint_to_json(c.checkpoint),
        "summarizer_usage": _usage_json(c.summarizer_usage),
    }


def compaction_from_json(d: dict[str, Any]) -> Compaction:
    usage = d.get("summarizer_usage")
    return Compaction(
        start_sequence=int(d["start_sequence"]),
        end_sequence=int(d["end_sequence"]),
        first_kept_event_id=str(d.get("first_kept_event_id", "")),
        first_kept_sequence=int(d.get("first_kept_sequence", 0)),
        summary=str(d.get("summary", "")),
        checkpoint=checkpoint_from_json(d.get("checkpoint") or {}),
        summarizer_usage=Usage(**{k: int(v) for k, v in usage.items()}) if usage else None,
    )
