"""Small constructors for domain events in selection tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from context_service.domain import model as m

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def text(role: str, value: str) -> m.Content:
    return m.Content(role, (m.Part(text=value),))


def call(*calls: tuple[str, str, dict[str, Any]]) -> m.Content:
    return m.Content("model", tuple(m.Part(function_call=m.FunctionCall(i, n, a)) for i, n, a in calls))


def response(*responses: tuple[str, str, dict[str, Any]]) -> m.Content:
    return m.Content("user", tuple(m.Part(function_response=m.FunctionResponse(i, n, r)) for i, n, r in responses))


def event(seq: int, content: m.Content | None, **kw: Any) -> m.Event:
    kw.setdefault("author", "user" if content is not None and content.role == "user" else "agent")
    kw.setdefault("create_time", T0 + dt.timedelta(seconds=seq))
    return m.Event(id=f"e{seq}", sequence=seq, content=content, **kw)


def compaction(seq: int, summary: str, first_kept: int, start: int = 1) -> m.Event:
    checkpoint = m.Checkpoint(
        schema_version=1, checkpoint_id=f"cp{seq}", trigger=m.CompactionTrigger.MANUAL,
        source_event_count=first_kept - start, source_first_event_id=f"e{start}",
        source_last_event_id=f"e{first_kept - 1}", source_first_time=None, source_last_time=None,
        source_fingerprint="0" * 64, retained_event_count=0, summary_bytes=len(summary.encode()),
        retained_user_turns=0, compactor="extractive",
    )
    return m.Event(
        id=f"c{seq}", sequence=seq, author="compactor", kind=m.EventKind.COMPACTION,
        create_time=T0 + dt.timedelta(seconds=seq),
        compaction=m.Compaction(start, first_kept - 1, f"e{first_kept}", first_kept, summary, checkpoint),
    )


def sequence(*contents: m.Content | None, **kw: Any) -> list[m.Event]:
    """Events numbered from 1, one per content."""
    return [event(i + 1, c, **kw) for i, c in enumerate(contents)]
