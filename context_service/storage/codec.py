"""Domain values <-> stored rows: events as indexed columns plus a JSON
body, state and config as JSON text, etags.

An event's body is compact JSON: ``{"content":`` and the content's
canonical JSON (``domain.selection.canonical``: the bytes the cache key and
the history fingerprints hash), then the other keys, sorted. A read keeps
those bytes on the content it decodes, so a content has one encoding from
storage to the wire. The fingerprint that makes appends idempotent hashes
the body, bytes we already produce; ``fingerprint_version`` says which
body a stored fingerprint hashed (``LEGACY_FINGERPRINT``: the body before
migration 0009, whose parts had snake_case keys).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import typing
from typing import Any

from context_service.domain import config as cfg
from context_service.domain import model as m
from context_service.domain import parts
from context_service.domain.selection.canonical import content_bytes, content_from_canonical


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


# A part's stored form is its canonical JSON dict (``domain/parts.py``).
part_json = parts.to_json
part_from_json = parts.from_json

# Which body a stored fingerprint hashed (``events.fingerprint_version``).
LEGACY_FINGERPRINT = 1  # the body before migration 0009: parts in snake_case
FINGERPRINT_VERSION = 2  # the body ``event_body`` writes
_CONTENT = '{"content":'
_decode_at = json.JSONDecoder().raw_decode


def _respelling(legacy: bool) -> dict[str, tuple[str, dict[str, str] | None]]:
    """A part dict's keys respelled, with those of its payload: canonical
    (camelCase) to the version-1 body's snake_case, or back. Walked from the
    kind table; JSON payloads (args, response) are values, left alone."""
    to_camel: dict[str, tuple[str, dict[str, str] | None]] = {"thought_signature": ("thoughtSignature", None)}
    for kind in parts.KINDS:
        to_camel[kind.name] = (kind.camel, dict(zip(kind.names, kind.camels, strict=True)) or None)
    if not legacy:
        return to_camel
    return {new: (old, {c: n for n, c in fields.items()} if fields else None)
            for old, (new, fields) in to_camel.items()}


_TO_LEGACY = _respelling(True)
_FROM_LEGACY = _respelling(False)


def _respell(part: dict[str, Any], keys: dict[str, tuple[str, dict[str, str] | None]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in part.items():
        new, fields = keys.get(key, (key, None))
        out[new] = {fields.get(k, k): v for k, v in value.items()} if fields else value
    return out


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


def _body_rest(e: m.Event) -> dict[str, Any]:
    """The body's keys besides the content."""
    body: dict[str, Any] = {}
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
    for name in _BODY_SCALARS:
        value = getattr(e, name)
        if value:
            body[name] = value
    return body


def _body(content: m.Content | None, rest: dict[str, Any]) -> str:
    text = dumps(rest)
    if content is None:
        return text
    return f"{_CONTENT}{content_bytes(content).decode()}{'}' if text == '{}' else ',' + text[1:]}"


def event_body(e: m.Event) -> str:
    """The JSON body: everything not stored in its own column, the content
    first, as its canonical JSON."""
    return _body(e.content, _body_rest(e))


def split_body(text: str) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """A body's keys besides the content, its content (parsed) and that
    content's canonical JSON (a slice of ``text``; "" without content)."""
    if not text.startswith(_CONTENT):
        body = json.loads(text)
        if "content" in body:
            raise ValueError("an event body not in the stored form: its content is not first (migration 0009)")
        return body, None, ""
    content, end = _decode_at(text, len(_CONTENT))
    rest = json.loads("{" + text[end + 1:]) if text[end] == "," else {}
    return rest, content, text[len(_CONTENT):end]


def legacy_body(e: m.Event) -> str:
    """The body version 1 stored for ``e`` (keys sorted, the content's parts
    in snake_case): what its fingerprint hashed."""
    body = _body_rest(e)
    if e.content is not None:
        body["content"] = {"role": e.content.role,
                           "parts": [_respell(parts.to_json(p), _TO_LEGACY) for p in e.content.parts]}
    return dumps(body)


def legacy_fingerprint(e: m.Event) -> str:
    """The fingerprint a version-1 row holds for ``e`` as submitted."""
    return event_fingerprint(e, legacy_body(e))


def body_from_legacy(text: str) -> str:
    """A version-1 body as ``event_body`` writes it (migration 0009): the
    parts' keys respelled, their JSON payloads' numbers as a Struct carries
    them (the values every read already returned on the wire)."""
    body = json.loads(text)
    content = body.pop("content", None)
    decoded = None if content is None else m.Content(
        content["role"], tuple(parts.from_json(_respell(p, _FROM_LEGACY)) for p in content["parts"]))
    return _body(decoded, body)


def body_to_legacy(text: str) -> str:
    """``body_from_legacy`` undone (migration 0009's downgrade)."""
    body, content, _ = split_body(text)
    if content is not None:
        body["content"] = {"role": content["role"], "parts": [_respell(p, _TO_LEGACY) for p in content["parts"]]}
    return dumps(body)


def part_from_legacy(d: dict[str, Any]) -> dict[str, Any]:
    """A part dict of the version-1 spelling in the canonical one (staged
    attachments, migration 0009)."""
    return parts.to_json(parts.from_json(_respell(d, _FROM_LEGACY)))


def part_to_legacy(d: dict[str, Any]) -> dict[str, Any]:
    return _respell(d, _TO_LEGACY)


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
        "turn_complete": e.turn_complete, "create_time": create_time, "fingerprint": fingerprint,
        "fingerprint_version": FINGERPRINT_VERSION, "body_json": body,
    }


# The event's fields held in columns of their own (``event_row``).
_COLUMNS = frozenset({"id", "author", "sequence", "invocation_id", "branch", "partial", "turn_complete",
                      "create_time", "kind"})
# Every other plain field (a string, bool or integer) is a body key of its
# own name, written when set: a new one needs no line here.
_BODY_SCALARS = tuple(name for name, hint in typing.get_type_hints(m.Event).items()
                      if hint in (str, bool, int) and name not in _COLUMNS)
# A retraction's target, in the body (no column: the append plan finds a
# session's retractions by this key, ``append_plan.Retractions``).
RETRACTS = "retracts_event_id"
assert RETRACTS in _BODY_SCALARS
# A model reply's fields that replies stored before they were fields carry
# in custom_metadata (left there: stored events never change), read from it.
_REPLY_FIELDS = ("finish_reason", "model_version")


def _scalars(body: dict[str, Any], role: str | None) -> dict[str, Any]:
    """The body's plain fields (those it lacks keep the event's defaults)."""
    out = {name: body[name] for name in _BODY_SCALARS if name in body}
    if role == "model":
        legacy = body.get("custom_metadata") or {}
        for key in _REPLY_FIELDS:
            if key not in out and isinstance(legacy.get(key), str):
                out[key] = legacy[key]
    return out


def event_from_row(row: Any, *, keep_canonical: bool = True) -> m.Event:
    """An event from a row of ``tables.events`` (any mapping-like row). Its
    content keeps the canonical JSON the body holds, unless not
    ``keep_canonical`` (callers that hold events long and only measure
    them: compaction views)."""
    body, content, canonical = split_body(row.body_json)
    usage = body.get("usage")
    cache = body.get("cache")
    compaction = body.get("compaction")
    role = None
    decoded = None
    if content is not None:
        role = content["role"]
        decoded = (content_from_canonical(content, canonical.encode()) if keep_canonical
                   else m.Content(role, tuple(part_from_json(p) for p in content["parts"])))
    return m.Event(
        id=row.event_id,
        author=row.author,
        content=decoded,
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
        **_scalars(body, role),
    )
