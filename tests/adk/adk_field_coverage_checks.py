"""Field coverage of the ADK client (tests/foundation/test_field_coverage.py
covers the other layers): an agentctx Event with every field set, through
agentctx_adk._convert to an ADK event and back, and a Generate reply into
ADK's LlmResponse (agentctx_adk._llm). Fields a path does not carry are in
the allowlists below, with the reason. Run in the ADK venv (no hypothesis
there: the messages are filled deterministically, a part of every kind in
each content) by tests/adk/test_adk_units.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from agentctx_adk import CACHE_METADATA_KEY, _convert, _llm
from google.protobuf import descriptor, message
from proto_diff import OPAQUE, lost  # copied beside this file (tests/support/proto_diff.py)

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2, event_pb2, generation_pb2

FD = descriptor.FieldDescriptor
# Values a format constrains, by "Message.field".
_FIXED: dict[str, Any] = {"Blob.mime_type": "image/png", "FileData.mime_type": "application/pdf"}


def filled(msg: message.Message, counter: itertools.count[int], member: str | None = None) -> message.Message:
    """``msg`` with every field set; a repeated message field holds one
    element per member of its element's oneof; ``member`` picks this
    message's oneof member."""
    desc = msg.DESCRIPTOR
    oneofs = [o for o in desc.oneofs if len(o.fields) > 1]
    chosen = {o.name: member or o.fields[0].name for o in oneofs}
    for field in desc.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.name in chosen and chosen[oneof.name] != field.name:
            continue
        n = next(counter)
        key = f"{desc.name}.{field.name}"
        if field.message_type is None:
            value = _FIXED.get(key, _scalar(field, n))
            if field.is_repeated:
                getattr(msg, field.name).extend([value, _scalar(field, next(counter))])
            else:
                setattr(msg, field.name, value)
        elif field.message_type.full_name in OPAQUE:
            _well_known(getattr(msg, field.name) if not field.is_repeated else getattr(msg, field.name).add(), n)
        elif field.is_repeated:
            sub = [o for o in field.message_type.oneofs if len(o.fields) > 1]
            for name in [f.name for o in sub for f in o.fields] or [None]:
                filled(getattr(msg, field.name).add(), counter, name)
        else:
            filled(getattr(msg, field.name), counter)
    return msg


def _scalar(field: FD, n: int) -> Any:
    if field.type == FD.TYPE_STRING:
        return f"{field.name}-{n}"
    if field.type == FD.TYPE_BYTES:
        return f"bytes-{n}".encode()
    if field.type == FD.TYPE_BOOL:
        return True
    if field.type == FD.TYPE_ENUM:
        values = [v.number for v in field.enum_type.values if v.number]
        return values[n % len(values)]
    if field.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return n + 0.25
    return 1000 + n


def _well_known(out: message.Message, n: int) -> None:
    if out.DESCRIPTOR.full_name == "google.protobuf.Struct":
        out.update({f"k{n}": f"v{n}", f"n{n}": n, "nested": {"list": [n, f"s{n}"]}})  # type: ignore[attr-defined]
    elif out.DESCRIPTOR.full_name == "google.protobuf.Timestamp":
        out.seconds, out.nanos = 1_700_000_000 + n, (n % 1000 + 1) * 1000  # type: ignore[attr-defined]
    else:
        out.seconds = n  # type: ignore[attr-defined]


def _event(role: str) -> event_pb2.Event:
    """Every field set; the content holds the part kinds a ``role`` content
    carries (a model asks for tool calls, a user answers them)."""
    e = filled(event_pb2.Event(), itertools.count(1))
    assert isinstance(e, event_pb2.Event)
    drop = "function_response" if role == "model" else "function_call"
    parts = [p for p in e.content.parts if p.WhichOneof("data") != drop]
    del e.content.parts[:]
    e.content.parts.extend(parts)
    e.content.role = role
    e.long_running_tool_ids[:] = [p.function_call.id for p in parts if p.WhichOneof("data") == "function_call"]
    return e


# What an agentctx event loses on its way through an ADK event and back.
EVENT_ALLOWED = {
    "Event.name": "output only: ADK events have an id only",
    "Event.sequence": "output only: ADK orders by time",
    "Event.cache_metadata": "ADK events have no cache record (AgentCtxLlm puts it in custom_metadata)",
    "Event.custom_metadata": "only its 'adk' key is ADK's (the rest of an ADK event); other keys are not ADK's",
    "Event.kind": "ADK events are messages: compaction entries are agentctx's own",
    "Event.compaction": "ADK events are messages: compaction entries are agentctx's own",
    # ADK's usage_metadata reads back from the ADK bag only: an event ADK
    # wrote has it there; one another client wrote shows no usage to ADK
    # (a gap this test found, left as it is; ADK's usage metadata would
    # have no cache-write count either).
    "Event.usage": "read from custom_metadata['adk'] only",
    "Event.retracts_event_id": "ADK has no retraction: its sessions never write one",
}


@pytest.mark.parametrize("role", ["model", "user"])
def test_an_event_through_adk_and_back_keeps_every_field(role: str) -> None:
    sent = _event(role)
    back = _convert.event_to_proto(_convert.event_from_proto(sent))
    unexpected = [p for p in lost(sent, back) if p not in EVENT_ALLOWED]
    assert not unexpected, "\n".join(f"{p} lost in the ADK event (agentctx_adk/_convert.py)" for p in unexpected)
    # Promoted fields travel in the fields, not in the ADK bag.
    assert {"finish_reason", "model_version"}.isdisjoint(
        _convert.from_struct(back.custom_metadata).get(_convert.ADK_KEY, {}))


# Where each reply Event field lands in ADK's LlmResponse (None: nowhere,
# with the reason). A new Event field fails here until it is placed.
REPLY_IN_LLM_RESPONSE: dict[str, str | None] = {
    "content": "content", "usage": "usage_metadata", "finish_reason": "finish_reason",
    "model_version": "model_version", "cache_metadata": "custom_metadata", "id": "custom_metadata",
    "error_code": "error_code", "error_message": "error_message",
    "name": None, "sequence": None, "invocation_id": None, "author": None, "branch": None,  # ADK's own event sets them
    "partial": None, "turn_complete": None, "create_time": None,  # ADK's own event sets them
    "custom_metadata": None,  # the reply's own metadata is not ADK's
    "kind": None, "compaction": None, "long_running_tool_ids": None,  # ADK derives these itself
    "retracts_event_id": None,  # a reply is never a retraction
}
# The public cache record in custom_metadata["agentctx_cache"] (AgentCtxLlm): what it leaves out.
RECORD_ALLOWED = {"expire_time": "not in the record", "scope_fingerprint": "not in the record"}


def test_a_generate_reply_reaches_adks_llm_response() -> None:
    reply = _event("model")
    out = _llm.llm_response(pb.GenerateResponse(reply=reply))
    unplaced = [f.name for f in reply.DESCRIPTOR.fields if f.name not in REPLY_IN_LLM_RESPONSE]
    assert not unplaced, f"Event fields with no place in ADK's LlmResponse: {unplaced}"
    assert out.content is not None and _convert.content_to_proto(out.content)[0] == reply.content
    assert out.usage_metadata is not None
    usage = _convert.usage_to_proto(out.usage_metadata)
    assert usage is not None and not [p for p in lost(reply.usage, usage) if p != "Usage.cache_write_tokens"]
    assert out.finish_reason is not None and out.finish_reason.value == generation_pb2.FinishReason.Name(
        reply.finish_reason).removeprefix("FINISH_REASON_")
    assert out.model_version == reply.model_version
    assert (out.error_code, out.error_message) == (reply.error_code, reply.error_message)
    record = (out.custom_metadata or {})[CACHE_METADATA_KEY]
    missing = [f.name for f, _ in reply.cache_metadata.ListFields() if f.name not in record and f.name not in
               RECORD_ALLOWED]
    assert not missing, f"CacheMetadata fields lost in LlmResponse.custom_metadata[{CACHE_METADATA_KEY!r}]: {missing}"
    assert (out.custom_metadata or {})["agentctx_reply_id"] == reply.id


def test_every_content_part_kind_round_trips() -> None:
    for role in ("model", "user"):
        content = _event(role).content
        proto, exact = _convert.content_to_proto(_convert.content_from_proto(content), role)
        assert exact and proto is not None
        unexpected = lost(content, proto)
        assert not unexpected, "\n".join(f"{p} lost in the ADK content (agentctx_adk/_convert.py)" for p in unexpected)
    assert [f.name for f in content_pb2.Part.DESCRIPTOR.oneofs_by_name["data"].fields] == [
        "text", "inline_data", "file_data", "function_call", "function_response"]
