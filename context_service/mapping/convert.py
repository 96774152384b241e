"""Proto <-> domain conversion for content, events and context config.

Struct numbers are doubles on the wire; integral values come back as ``int``
so that canonical JSON (and fingerprints) do not depend on how a client
encoded a count.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, cast

from google.protobuf import descriptor, duration_pb2, struct_pb2, timestamp_pb2

from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import cache_pb2, content_pb2, event_pb2, generation_pb2
from agentctx_common.canonical import struct_to_dict
from agentctx_common.part_kinds import BY_NAME, FieldType
from context_service.domain import config as cfg
from context_service.domain import model as m
from context_service.domain import parts

# --- JSON values ------------------------------------------------------------

def dict_to_struct(data: dict[str, Any] | None, out: struct_pb2.Struct | None = None) -> struct_pb2.Struct:
    out = out if out is not None else struct_pb2.Struct()
    if data:
        out.update(data)
    return out


# --- time -------------------------------------------------------------------


def ts_to_dt(ts: timestamp_pb2.Timestamp) -> dt.datetime | None:
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return dt.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, tz=dt.UTC)


def dt_to_ts(value: dt.datetime | None, out: timestamp_pb2.Timestamp) -> None:
    if value is not None:
        out.FromDatetime(value.astimezone(dt.UTC).replace(tzinfo=None))


def duration_to_s(d: duration_pb2.Duration) -> float | None:
    if d.seconds == 0 and d.nanos == 0:
        return None
    return d.seconds + d.nanos / 1e9


# --- content ----------------------------------------------------------------
# The Part oneof is read through the kind table (``agentctx_common.part_kinds``,
# ``domain/parts.py``): a proto payload and its domain payload have the same
# fields.


def part_from_proto(p: content_pb2.Part) -> m.Part:
    name = p.WhichOneof("data")
    if name is None:
        return m.Part(thought=p.thought, thought_signature=p.thought_signature)
    kind = BY_NAME[name]
    payload: Any = getattr(p, name)
    if kind.fields:
        values = list(kind.values(payload))
        for i in kind.json_at:
            values[i] = struct_to_dict(values[i])
        payload = parts.payload_of(kind, values)
    return parts.make(kind, payload, p.thought, p.thought_signature)


def part_to_proto(part: m.Part, out: content_pb2.Part) -> None:
    kind = parts.kind_of(part)
    if kind is not None:
        payload = getattr(part, kind.name)
        if not kind.fields:
            setattr(out, kind.name, payload)
        else:
            sub = getattr(out, kind.name)
            for f in kind.fields:
                if f.type is FieldType.JSON:
                    dict_to_struct(getattr(payload, f.name), getattr(sub, f.name))
                else:
                    setattr(sub, f.name, getattr(payload, f.name))
    if part.thought:
        out.thought = True
    if part.thought_signature:
        out.thought_signature = part.thought_signature


def content_from_proto(c: content_pb2.Content) -> m.Content:
    return m.Content(role=c.role, parts=tuple(part_from_proto(p) for p in c.parts))


def content_to_proto(content: m.Content, out: content_pb2.Content | None = None) -> content_pb2.Content:
    out = out if out is not None else content_pb2.Content()
    out.role = content.role
    for part in content.parts:
        part_to_proto(part, out.parts.add())
    return out


# --- usage and cache --------------------------------------------------------


def usage_from_proto(u: generation_pb2.Usage) -> m.Usage:
    return m.Usage(u.prompt_tokens, u.cached_prompt_tokens, u.output_tokens, u.thoughts_tokens, u.total_tokens,
                   u.cache_write_tokens)


def usage_to_proto(u: m.Usage, out: generation_pb2.Usage) -> None:
    out.prompt_tokens = u.prompt_tokens
    out.cached_prompt_tokens = u.cached_prompt_tokens
    out.output_tokens = u.output_tokens
    out.thoughts_tokens = u.thoughts_tokens
    out.total_tokens = u.total_tokens
    out.cache_write_tokens = u.cache_write_tokens


def cache_from_proto(c: cache_pb2.CacheMetadata) -> m.CacheInfo:
    return m.CacheInfo(
        state=m.CacheState(cache_pb2.CacheState.Name(c.state).removeprefix("CACHE_STATE_")),
        bypass_reason=cache_pb2.CacheBypassReason.Name(c.bypass_reason).removeprefix("CACHE_BYPASS_REASON_"),
        prefix_fingerprint=c.prefix_fingerprint,
        prefix_tokens=c.prefix_tokens,
        expire_time=ts_to_dt(c.expire_time),
        scope_fingerprint=c.scope_fingerprint,
        uses=c.uses,
    )


def cache_to_proto(c: m.CacheInfo, out: cache_pb2.CacheMetadata) -> None:
    out.state = cast(cache_pb2.CacheState, cache_pb2.CacheState.Value(f"CACHE_STATE_{c.state.value}"))
    out.bypass_reason = cast(
        cache_pb2.CacheBypassReason, cache_pb2.CacheBypassReason.Value(f"CACHE_BYPASS_REASON_{c.bypass_reason}")
    )
    out.prefix_fingerprint = c.prefix_fingerprint
    out.prefix_tokens = c.prefix_tokens
    dt_to_ts(c.expire_time, out.expire_time)
    out.scope_fingerprint = c.scope_fingerprint
    out.uses = c.uses


# --- events -----------------------------------------------------------------


def finish_reason_name(value: int) -> str:
    name = generation_pb2.FinishReason.Name(value).removeprefix("FINISH_REASON_")
    return "" if name == "UNSPECIFIED" else name


def finish_reason_to_proto(name: str) -> generation_pb2.FinishReason:
    """A finish reason by name; a name this version does not know is OTHER."""
    if not name:
        return generation_pb2.FINISH_REASON_UNSPECIFIED
    key = f"FINISH_REASON_{name}"
    if key not in generation_pb2.FinishReason.keys():
        return generation_pb2.FINISH_REASON_OTHER
    return cast(generation_pb2.FinishReason, generation_pb2.FinishReason.Value(key))


def trigger_to_proto(trigger: m.CompactionTrigger) -> event_pb2.CompactionTrigger:
    return cast(event_pb2.CompactionTrigger, event_pb2.CompactionTrigger.Value(f"COMPACTION_TRIGGER_{trigger.value}"))


def _trigger_name(value: int) -> m.CompactionTrigger:
    return m.CompactionTrigger(event_pb2.CompactionTrigger.Name(value).removeprefix("COMPACTION_TRIGGER_"))


def checkpoint_from_proto(c: event_pb2.CompactionCheckpoint) -> m.Checkpoint:
    return m.Checkpoint(
        schema_version=c.schema_version,
        checkpoint_id=c.checkpoint_id,
        trigger=_trigger_name(c.trigger),
        source_event_count=c.source_event_count,
        source_first_event_id=c.source_first_event_id,
        source_last_event_id=c.source_last_event_id,
        source_first_time=ts_to_dt(c.source_first_time),
        source_last_time=ts_to_dt(c.source_last_time),
        source_fingerprint=c.source_fingerprint,
        retained_event_count=c.retained_event_count,
        summary_bytes=c.summary_bytes,
        retained_user_turns=c.retained_user_turns,
        compactor=c.compactor,
        retained_tokens=c.retained_tokens,
    )


def checkpoint_to_proto(c: m.Checkpoint, out: event_pb2.CompactionCheckpoint) -> None:
    out.schema_version = c.schema_version
    out.checkpoint_id = c.checkpoint_id
    out.trigger = trigger_to_proto(c.trigger)
    out.source_event_count = c.source_event_count
    out.source_first_event_id = c.source_first_event_id
    out.source_last_event_id = c.source_last_event_id
    dt_to_ts(c.source_first_time, out.source_first_time)
    dt_to_ts(c.source_last_time, out.source_last_time)
    out.source_fingerprint = c.source_fingerprint
    out.retained_event_count = c.retained_event_count
    out.summary_bytes = c.summary_bytes
    out.retained_user_turns = c.retained_user_turns
    out.compactor = c.compactor
    out.retained_tokens = c.retained_tokens


_SCALAR_TYPES = frozenset({
    descriptor.FieldDescriptor.TYPE_STRING, descriptor.FieldDescriptor.TYPE_BOOL,
    descriptor.FieldDescriptor.TYPE_INT64, descriptor.FieldDescriptor.TYPE_INT32,
    descriptor.FieldDescriptor.TYPE_UINT64, descriptor.FieldDescriptor.TYPE_UINT32,
})


def same_named_scalars(message: Any, domain: type) -> tuple[str, ...]:
    """The singular string, bool and integer fields of ``message`` (a
    message descriptor) that the dataclass ``domain`` has by the same name: they pass between the two as
    they are, so a new one needs no line of mapping."""
    names = {f.name for f in dataclasses.fields(domain)}
    return tuple(f.name for f in message.fields
                 if f.name in names and not f.is_repeated and f.type in _SCALAR_TYPES)


# Event fields that pass as they are; ``sequence`` is output-only (set on
# the way out, never taken from a client).
_EVENT_SCALARS_OUT = same_named_scalars(event_pb2.Event.DESCRIPTOR, m.Event)
_EVENT_SCALARS_IN = tuple(name for name in _EVENT_SCALARS_OUT if name != "sequence")


def event_from_proto(e: event_pb2.Event) -> m.Event:
    """A client's event. Output-only fields (name, sequence) are ignored."""
    compaction = None
    if e.HasField("compaction"):
        c = e.compaction
        compaction = m.Compaction(
            start_sequence=c.start_sequence,
            end_sequence=c.end_sequence,
            first_kept_event_id=c.first_kept_event_id,
            first_kept_sequence=c.first_kept_sequence,
            summary=c.summary,
            checkpoint=checkpoint_from_proto(c.checkpoint),
            summarizer_usage=usage_from_proto(c.summarizer_usage) if c.HasField("summarizer_usage") else None,
        )
    return m.Event(
        **{name: getattr(e, name) for name in _EVENT_SCALARS_IN},
        content=content_from_proto(e.content) if e.HasField("content") else None,
        create_time=ts_to_dt(e.create_time),
        usage=usage_from_proto(e.usage) if e.HasField("usage") else None,
        cache=cache_from_proto(e.cache_metadata) if e.HasField("cache_metadata") else None,
        custom_metadata=struct_to_dict(e.custom_metadata) if e.HasField("custom_metadata") else None,
        kind=m.EventKind.COMPACTION if e.kind == event_pb2.EVENT_KIND_COMPACTION else m.EventKind.MESSAGE,
        compaction=compaction,
        long_running_tool_ids=tuple(e.long_running_tool_ids),
        finish_reason=finish_reason_name(e.finish_reason),
    )


def event_to_proto(event: m.Event, session: m.SessionKey | None, out: event_pb2.Event | None = None) -> event_pb2.Event:
    out = out if out is not None else event_pb2.Event()
    if session is not None:
        out.name = session.event_name(event.id)
    for name in _EVENT_SCALARS_OUT:
        setattr(out, name, getattr(event, name))
    if event.content is not None:
        content_to_proto(event.content, out.content)
    dt_to_ts(event.create_time, out.create_time)
    if event.usage is not None:
        usage_to_proto(event.usage, out.usage)
    if event.cache is not None:
        cache_to_proto(event.cache, out.cache_metadata)
    if event.custom_metadata is not None:
        dict_to_struct(event.custom_metadata, out.custom_metadata)
    out.kind = event_pb2.EVENT_KIND_COMPACTION if event.is_compaction else event_pb2.EVENT_KIND_MESSAGE
    if event.compaction is not None:
        c = event.compaction
        out.compaction.start_sequence = c.start_sequence
        out.compaction.end_sequence = c.end_sequence
        out.compaction.first_kept_event_id = c.first_kept_event_id
        out.compaction.first_kept_sequence = c.first_kept_sequence
        out.compaction.summary = c.summary
        checkpoint_to_proto(c.checkpoint, out.compaction.checkpoint)
        if c.summarizer_usage is not None:
            usage_to_proto(c.summarizer_usage, out.compaction.summarizer_usage)
    out.long_running_tool_ids.extend(event.long_running_tool_ids)
    out.finish_reason = finish_reason_to_proto(event.finish_reason)
    return out


# --- context config ---------------------------------------------------------


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def _enum_name(enum_type: Any, value: int, prefix: str) -> str:
    name: str = enum_type.Name(value)
    return name.removeprefix(prefix)


def filter_from_proto(f: policy_pb2.EventFilter) -> cfg.EventFilter:
    return cfg.EventFilter(
        authors=tuple(f.authors),
        exclude_authors=tuple(f.exclude_authors),
        invocation_ids=tuple(f.invocation_ids),
        content_types=tuple(
            cfg.ContentType(_enum_name(policy_pb2.ContentType, t, "CONTENT_TYPE_")) for t in f.content_types
        )
        if all(t != policy_pb2.CONTENT_TYPE_UNSPECIFIED for t in f.content_types)
        else tuple(int(t) for t in f.content_types),  # kept raw so validation can name the bad value
        start_time=ts_to_dt(f.start_time) if f.HasField("start_time") else None,
        end_time=ts_to_dt(f.end_time) if f.HasField("end_time") else None,
        include_partial=f.include_partial,
        final_only=f.final_only,
        branch=f.branch,
    )


def filter_to_proto(f: cfg.EventFilter, out: policy_pb2.EventFilter) -> None:
    out.authors.extend(f.authors)
    out.exclude_authors.extend(f.exclude_authors)
    out.invocation_ids.extend(f.invocation_ids)
    out.content_types.extend(
        cast(policy_pb2.ContentType, policy_pb2.ContentType.Value(f"CONTENT_TYPE_{t.value}"))
        if isinstance(t, cfg.ContentType) else cast(policy_pb2.ContentType, t)
        for t in f.content_types
    )
    dt_to_ts(f.start_time, out.start_time)
    dt_to_ts(f.end_time, out.end_time)
    out.include_partial = f.include_partial
    out.final_only = f.final_only
    out.branch = f.branch


def selection_from_proto(p: policy_pb2.SelectionPolicy) -> cfg.SelectionPolicy:
    return cfg.SelectionPolicy(
        max_bytes=_opt(p, "max_bytes"),
        max_tokens=_opt(p, "max_tokens"),
        max_request_bytes=_opt(p, "max_request_bytes"),
        max_request_tokens=_opt(p, "max_request_tokens"),
        bytes_per_token=_opt(p, "bytes_per_token"),
        overflow=cfg.OverflowMode(_enum_name(policy_pb2.OverflowMode, p.overflow, "OVERFLOW_MODE_")),
        filter=filter_from_proto(p.filter) if p.HasField("filter") else None,
        extra_secret_keys=tuple(p.extra_secret_keys),
        disable_calibration=p.disable_calibration,
        max_attachment_bytes=_opt(p, "max_attachment_bytes"),
        max_attachment_tokens=_opt(p, "max_attachment_tokens"),
    )


def selection_to_proto(p: cfg.SelectionPolicy, out: policy_pb2.SelectionPolicy) -> None:
    for name in ("max_bytes", "max_tokens", "max_request_bytes", "max_request_tokens", "bytes_per_token",
                 "max_attachment_bytes", "max_attachment_tokens"):
        value = getattr(p, name)
        if value is not None:
            setattr(out, name, value)
    out.overflow = cast(policy_pb2.OverflowMode, policy_pb2.OverflowMode.Value(f"OVERFLOW_MODE_{p.overflow.value}"))
    if p.filter is not None:
        filter_to_proto(p.filter, out.filter)
    out.extra_secret_keys.extend(p.extra_secret_keys)
    out.disable_calibration = p.disable_calibration


_COMPACTION_OPTIONALS = (
    "context_window", "reserve_tokens", "keep_recent_tokens", "retain_recent_exchanges",
    "background_tokens", "event_threshold", "turn_interval", "overflow_keep_recent_tokens",
    "max_input_bytes", "max_summary_bytes",
)


def compaction_from_proto(p: policy_pb2.CompactionPolicy, *, enabled_set: bool = True) -> cfg.CompactionPolicy:
    return cfg.CompactionPolicy(
        enabled=p.enabled if enabled_set else None,
        compactor=cfg.CompactorKind(_enum_name(policy_pb2.CompactorKind, p.compactor, "COMPACTOR_KIND_")),
        remote_target=p.remote_target,
        timeout_s=duration_to_s(p.timeout) if p.HasField("timeout") else None,
        model=p.model,
        **{name: _opt(p, name) for name in _COMPACTION_OPTIONALS},
    )


def compaction_to_proto(p: cfg.CompactionPolicy, out: policy_pb2.CompactionPolicy) -> None:
    out.enabled = bool(p.enabled)
    out.compactor = cast(policy_pb2.CompactorKind, policy_pb2.CompactorKind.Value(f"COMPACTOR_KIND_{p.compactor.value}"))
    out.remote_target = p.remote_target
    for name in _COMPACTION_OPTIONALS:
        value = getattr(p, name)
        if value is not None:
            setattr(out, name, value)
    if p.timeout_s is not None:
        out.timeout.FromNanoseconds(int(p.timeout_s * 1e9))
    out.model = p.model


def cache_policy_from_proto(p: policy_pb2.CachePolicy, *, enabled_set: bool = True) -> cfg.CachePolicy:
    return cfg.CachePolicy(
        enabled=p.enabled if enabled_set else None,
        ttl_s=duration_to_s(p.ttl) if p.HasField("ttl") else None,
        scope_policy=struct_to_dict(p.scope_policy) if p.HasField("scope_policy") else None,
    )


def cache_policy_to_proto(p: cfg.CachePolicy, out: policy_pb2.CachePolicy) -> None:
    out.enabled = bool(p.enabled)
    if p.ttl_s is not None:
        out.ttl.FromNanoseconds(int(p.ttl_s * 1e9))
    if p.scope_policy is not None:
        dict_to_struct(p.scope_policy, out.scope_policy)


def retrieval_from_proto(p: policy_pb2.MemoryRetrievalPolicy, *, enabled_set: bool = True) -> cfg.RetrievalPolicy:
    return cfg.RetrievalPolicy(
        enabled=p.enabled if enabled_set else None,
        limit=p.limit if p.HasField("limit") else None,
        min_score=p.min_score if p.HasField("min_score") else None,
    )


def retrieval_to_proto(p: cfg.RetrievalPolicy, out: policy_pb2.MemoryRetrievalPolicy) -> None:
    out.enabled = bool(p.enabled)
    if p.limit is not None:
        out.limit = p.limit
    if p.min_score is not None:
        out.min_score = p.min_score


def config_from_proto(c: policy_pb2.ContextConfig) -> cfg.ContextConfig:
    """A client's config. A present compaction/cache/retrieval message sets
    its ``enabled`` flag explicitly (proto3 cannot tell false from unset)."""
    return cfg.ContextConfig(
        model=c.model,
        selection=selection_from_proto(c.selection),
        compaction=compaction_from_proto(c.compaction, enabled_set=c.HasField("compaction")),
        cache=cache_policy_from_proto(c.cache, enabled_set=c.HasField("cache")),
        retrieval=retrieval_from_proto(c.retrieval, enabled_set=c.HasField("retrieval")),
        tools=tuple(cfg.ToolDeclaration(t.name, tuple(t.capabilities)) for t in c.tools),
    )


def config_to_proto(c: cfg.ContextConfig, out: policy_pb2.ContextConfig) -> None:
    """Only the policies the config sets: an unset compaction or cache policy
    stays absent, so a client that reads a session and writes its config back
    does not turn an unset ``enabled`` into an explicit false."""
    out.model = c.model
    if cfg.to_json(c.selection):
        selection_to_proto(c.selection, out.selection)
    if cfg.to_json(c.compaction):
        compaction_to_proto(c.compaction, out.compaction)
    if cfg.to_json(c.cache):
        cache_policy_to_proto(c.cache, out.cache)
    if cfg.to_json(c.retrieval):
        retrieval_to_proto(c.retrieval, out.retrieval)
    for tool in c.tools:
        out.tools.add(name=tool.name, capabilities=tool.capabilities)
