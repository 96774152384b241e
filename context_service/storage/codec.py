"""Domain values <-> stored rows: events as indexed columns plus a JSON
body, state and config as JSON text, etags.

The body JSON is canonical (keys sorted, compact), so the fingerprint that
makes appends idempotent is a hash of bytes we already produce.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from context_service.domain import config as cfg
from context_service.domain import model as m
from context_service.domain import parts


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def etag(incarnation: str, version: int) -> str:
    return f"{incarnation}.{version}"


# --- state and config ---------------------------------------------------------


def config_to_text(config: cfg.ContextConfig) -> str:
    return dumps(cfg.to_json(config))


def config_from_text(text: str) -> cfg.ContextConfig:
    return cfg.config_from_json(json.loads(text))


# --- events ---------------------------------------------------------------------


def _time(value: dt.datetime | None) -> str | None:
    return value.astimezone(dt.UTC).isoformat() if value is not None else None


def _parse_time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value is not None else None


# A part's stored form is the domain's JSON-safe dict (``domain/parts.py``).
part_json = parts.to_json
part_from_json = parts.from_json


def _usage_json(u: m.Usage) -> dict[str, int]:
    return {
        "prompt_tokens": u.prompt_tokens, "cached_prompt_tokens": u.cached_prompt_tokens,
        "output_tokens": u.output_tokens, "thoughts_tokens": u.thoughts_tokens, "total_tokens": u.total_tokens,
        "cache_write_tokens": u.cache_write_tokens,
    }


def _cache_json(c: m.CacheInfo) -> dict[str, Any]:
    return {
        "state": c.state.value, "bypass_reason": c.bypass_reason, "prefix_fingerprint": c.prefix_fingerprint,
        "prefix_tokens": c.prefix_tokens, "expire_time": _time(c.expire_time),
        "scope_fingerprint": c.scope_fingerprint, "uses": c.uses,
    }


def _cache(d: dict[str, Any]) -> m.CacheInfo:
    return m.CacheInfo(
        state=m.CacheState(d["state"]), bypass_reason=d["bypass_reason"],
        prefix_fingerprint=d["prefix_fingerprint"], prefix_tokens=d["prefix_tokens"],
        expire_time=_parse_time(d["expire_time"]), scope_fingerprint=d["scope_fingerprint"], uses=d["uses"],
    )


def _checkpoint_json(c: m.Checkpoint) -> dict[str, Any]:
    return {
        "schema_version": c.schema_version, "checkpoint_id": c.checkpoint_id, "trigger": c.trigger.value,
        "source_event_count": c.source_event_count, "source_first_event_id": c.source_first_event_id,
        "source_last_event_id": c.source_last_event_id, "source_first_time": _time(c.source_first_time),
        "source_last_time": _time(c.source_last_time), "source_fingerprint": c.source_fingerprint,
        "retained_event_count": c.retained_event_count, "summary_bytes": c.summary_bytes,
        "retained_user_turns": c.retained_user_turns, "compactor": c.compactor,
        "retained_tokens": c.retained_tokens,
    }


def _checkpoint(d: dict[str, Any]) -> m.Checkpoint:
    return m.Checkpoint(
        **{**d, "trigger": m.CompactionTrigger(d["trigger"]),
           "source_first_time": _parse_time(d["source_first_time"]),
           "source_last_time": _parse_time(d["source_last_time"])}
    )


def _compaction_json(c: m.Compaction) -> dict[str, Any]:
    out: dict[str, Any] = {
        "start_sequence": c.start_sequence, "end_sequence": c.end_sequence,
        "first_kept_event_id": c.first_kept_event_id, "first_kept_sequence": c.first_kept_sequence,
        "summary": c.summary, "checkpoint": _checkpoint_json(c.checkpoint),
    }
    if c.summarizer_usage is not None:
        out["summarizer_usage"] = _usage_json(c.summarizer_usage)
    return out


def _compaction(d: dict[str, Any]) -> m.Compaction:
    usage = d.get("summarizer_usage")
    return m.Compaction(
        start_sequence=d["start_sequence"], end_sequence=d["end_sequence"],
        first_kept_event_id=d["first_kept_event_id"], first_kept_sequence=d["first_kept_sequence"],
        summary=d["summary"], checkpoint=_checkpoint(d["checkpoint"]),
        summarizer_usage=m.Usage(**usage) if usage is not None else None,
    )


def event_body(e: m.Event) -> str:
    """The JSON body: everything not stored in its own column."""
    body: dict[str, Any] = {}
    if e.content is not None:
        body["content"] = {"role": e.content.role, "parts": [part_json(p) for p in e.content.parts]}
    if e.usage is not None:
        body["usage"] = _usage_json(e.usage)
    if e.cache is not None:
        body["cache"] = _cache_json(e.cache)
    if e.custom_metadata is not None:
        body["custom_metadata"] = e.custom_metadata
    if e.compaction is not None:
        body["compaction"] = _compaction_json(e.compaction)
    if e.long_running_tool_ids:
        body["long_running_tool_ids"] = list(e.long_running_tool_ids)
    for key in _REPLY_FIELDS:
        if getattr(e, key):
            body[key] = getattr(e, key)
    if e.retracts_event_id:
        body[RETRACTS] = e.retracts_event_id
    return dumps(body)


def event_fingerprint(e: m.Event, body: str) -> str:
    """SHA-256 of the event as submitted (before the server sets its time)."""
    header = dumps([
        e.id, e.kind.value, e.author, e.invocation_id, e.branch, e.partial, e.turn_complete, _time(e.create_time),
    ])
    return hashlib.sha256(f"{header}\n{body}".encode()).hexdigest()


def event_row(e: m.Event, *, session_pk: int, sequence: int, create_time: dt.datetime, body: str, fingerprint: str) -> dict[str, Any]:
    return {
        "session_pk": session_pk, "sequence": sequence, "event_id": e.id, "kind": e.kind.value,
        "author": e.author, "invocation_id": e.invocation_id, "branch": e.branch, "partial": e.partial,
        "turn_complete": e.turn_complete, "create_time": create_time, "fingerprint": fingerprint, "body_json": body,
    }


# A model reply's fields kept in the body. Replies stored before they were
# fields carry them in custom_metadata (left there: stored events never
# change) and are read from it.
_REPLY_FIELDS = ("finish_reason", "model_version")
# A retraction's target, in the body (no column: the append plan finds a
# session's retractions by this key, ``append_plan.Retractions``).
RETRACTS = "retracts_event_id"


def _reply_field(body: dict[str, Any], key: str) -> str:
    if key in body:
        return str(body[key])
    legacy = body.get("custom_metadata") or {}
    role = (body.get("content") or {}).get("role")
    value = legacy.get(key) if role == "model" else None
    return value if isinstance(value, str) else ""


def event_from_row(row: Any) -> m.Event:
    """An event from a row of ``tables.events`` (any mapping-like row)."""
    body = json.loads(row.body_json)
    content = body.get("content")
    usage = body.get("usage")
    cache = body.get("cache")
    compaction = body.get("compaction")
    return m.Event(
        id=row.event_id,
        author=row.author,
        content=m.Content(content["role"], tuple(part_from_json(p) for p in content["parts"])) if content is not None else None,
        sequence=row.sequence,
        invocation_id=row.invocation_id,
        branch=row.branch,
        partial=bool(row.partial),
        turn_complete=bool(row.turn_complete),
        create_time=row.create_time,
        usage=m.Usage(**usage) if usage is not None else None,
        cache=_cache(cache) if cache is not None else None,
        custom_metadata=body.get("custom_metadata"),
        kind=m.EventKind(row.kind),
        compaction=_compaction(compaction) if compaction is not None else None,
        long_running_tool_ids=tuple(body.get("long_running_tool_ids", ())),
        finish_reason=_reply_field(body, "finish_reason"),
        model_version=_reply_field(body, "model_version"),
        retracts_event_id=body.get(RETRACTS, ""),
    )
