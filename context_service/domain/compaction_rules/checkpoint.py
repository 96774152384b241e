"""The versioned, JSON-safe checkpoint committed with every summary and the
source fingerprint it carries (storage keeps its own JSON codec of the
whole compaction body).

The checkpoint holds identifiers, fingerprints and counts only (erlang_adk's
fields), so diagnostics can show it without showing content.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

from agentctx_common.canonical import canonical_json
from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.sizing import Measure, measure_all
from context_service.domain.model import Checkpoint, Event

SCHEMA_VERSION = 1


def source_fingerprint(
    events: Sequence[Event], previous_summary: str, measures: Sequence[Measure] | None = None
) -> str:
    """SHA-256 over the summarized events (ids, sequences, canonical content)
    and the summary folded in. Equal fingerprints mean the same source."""
    h = hashlib.sha256()
    h.update(canonical_json({"schema": SCHEMA_VERSION, "previousSummary": previous_summary}))
    for e, m in zip(events, measures if measures is not None else measure_all(events), strict=False):
        h.update(canonical_json([e.id, e.sequence, e.author, e.partial]))
        h.update(m.digest)
    return h.hexdigest()


def _time(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    return aware.astimezone(dt.UTC).isoformat()


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


def check_checkpoint_size(c: Checkpoint, limit: int) -> None:
    size = len(canonical_json(checkpoint_to_json(c)))
    if size > limit:
        raise errors.checkpoint_too_large(size, limit)
