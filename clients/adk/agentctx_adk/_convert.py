"""ADK events and state <-> agentctx messages.

What agentctx carries natively goes into its own fields (ids, author,
branch, content, usage, long-running tool ids, time, finish reason, model
version, error code and message), so the context service
can select, budget and send it. Everything else of the ADK event (actions,
grounding, transcriptions, ADK's custom_metadata...) is kept,
as ADK's own JSON dump, under one key of the agentctx event's
custom_metadata (never sent to a model) and restored on read. A content
agentctx cannot hold exactly (a part kind it has no field for, an empty
text, a role other than user/model) is kept there too; the model then sees
the parts it can carry.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any, cast

from google.adk.events.event import Event
from google.adk.sessions.state import State
from google.genai import types
from google.protobuf import json_format, struct_pb2

from agentctx.type.v1 import content_pb2, event_pb2, generation_pb2

# The custom_metadata key holding the rest of the ADK event.
ADK_KEY = "adk"
# ADK event fields agentctx's Event has by the same name, as strings.
_NATIVE_STRINGS = ("model_version", "error_code", "error_message")
# Kept only in agentctx's own fields. partial and turn_complete are kept in
# both: ADK tells False from unset (None), agentctx does not.
_NATIVE = ("id", "invocation_id", "author", "branch", "timestamp", "content", "long_running_tool_ids")
_LABEL = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_BRANCH = re.compile(r"[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*")
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
_CALL_ID = re.compile(r"[!-~]{1,128}")
_MIME = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")
_SAFE_INT = 2**53


# --- JSON values ------------------------------------------------------------


def restore_numbers(value: Any) -> Any:
    """JSON through protobuf's Struct comes back with every number a float
    and its keys in an order of the reading process's own (a Struct is a
    map, and protobuf's map order follows a per-process hash seed). ints
    (what ADK state and tool arguments mostly hold) are given back as ints,
    a float with no fraction as an int too, and every object's keys in one
    order, sorted, the same in every process and on every replica: the
    bytes ADK builds a prompt from do not change between invocations, so
    a provider's prefix cache keeps matching."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < _SAFE_INT else value
    if isinstance(value, dict):
        return {k: restore_numbers(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [restore_numbers(v) for v in value]
    return value


def canonical_order(value: Any) -> Any:
    """``value`` with every object's keys in the order a read gives them
    back (sorted), values unchanged."""
    if isinstance(value, dict):
        return {k: canonical_order(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical_order(v) for v in value]
    return value


def order_event(event: Event) -> None:
    """Puts the JSON objects of ``event`` (tool arguments and results, the
    state delta) in the order a read gives them back, in place, so the
    event an appending process keeps equals, byte for byte, what every
    other process reads."""
    for part in (event.content.parts or ()) if event.content else ():
        if part.function_call is not None and part.function_call.args:
            part.function_call.args = canonical_order(part.function_call.args)
        if part.function_response is not None and part.function_response.response:
            part.function_response.response = canonical_order(part.function_response.response)
    if event.actions and event.actions.state_delta:
        event.actions.state_delta = canonical_order(event.actions.state_delta)


def to_struct(value: dict[str, Any] | None) -> struct_pb2.Struct | None:
    if value is None:
        return None
    out = struct_pb2.Struct()
    out.update(value)
    return out


def from_struct(value: struct_pb2.Struct) -> dict[str, Any]:
    return restore_numbers(json_format.MessageToDict(value))  # type: ignore[no-any-return]


# --- state ------------------------------------------------------------------


def split_state(state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(session, user, app) of an ADK state or delta, prefixes removed;
    ``temp:`` keys are never stored."""
    session: dict[str, Any] = {}
    user: dict[str, Any] = {}
    app: dict[str, Any] = {}
    for key, value in (state or {}).items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return session, user, app


def merge_state(session: dict[str, Any], user: dict[str, Any], app: dict[str, Any]) -> dict[str, Any]:
    """ADK's view: the session's keys, then ``app:`` and ``user:`` keys."""
    merged = dict(session)
    for key, value in app.items():
        merged[State.APP_PREFIX + key] = value
    for key, value in user.items():
        merged[State.USER_PREFIX + key] = value
    return merged


# --- content ----------------------------------------------------------------


def _part_to_proto(part: types.Part, role: str) -> content_pb2.Part | None:
    """The part as agentctx carries it, or None when it has no payload
    agentctx can take as it is."""
    out = content_pb2.Part(thought=bool(part.thought))
    if part.thought_signature:
        out.thought_signature = part.thought_signature
    if part.text is not None:
        if not part.text and not part.thought_signature:
            return None
        out.text = part.text
    elif part.inline_data is not None:
        blob = part.inline_data
        if not blob.data or not blob.mime_type or not _MIME.fullmatch(blob.mime_type):
            return None
        out.inline_data.CopyFrom(content_pb2.Blob(mime_type=blob.mime_type, data=blob.data))
    elif part.file_data is not None:
        fd = part.file_data
        if not fd.file_uri or (fd.mime_type and not _MIME.fullmatch(fd.mime_type)):
            return None
        out.file_data.CopyFrom(content_pb2.FileData(mime_type=fd.mime_type or "", file_uri=fd.file_uri))
    elif part.function_call is not None:
        fc = part.function_call
        if role != "model" or not fc.name or not _FUNCTION_NAME.fullmatch(fc.name) or (
                fc.id and not _CALL_ID.fullmatch(fc.id)) or not _finite(fc.args):
            return None
        out.function_call.CopyFrom(content_pb2.FunctionCall(id=fc.id or "", name=fc.name, args=to_struct(fc.args or {})))
    elif part.function_response is not None:
        fr = part.function_response
        if role != "user" or not fr.name or not _FUNCTION_NAME.fullmatch(fr.name) or not fr.id or \
                not _CALL_ID.fullmatch(fr.id) or not _finite(fr.response):
            return None
        out.function_response.CopyFrom(
            content_pb2.FunctionResponse(id=fr.id, name=fr.name, response=to_struct(fr.response or {})))
    else:
        return None
    return out


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def content_to_proto(content: types.Content, author: str = "") -> tuple[content_pb2.Content | None, bool]:
    """(what agentctx can carry of ``content``, whether that is all of it)."""
    role = content.role if content.role in ("user", "model") else ("user" if author == "user" else "model")
    parts = []
    for part in content.parts or ():
        converted = _part_to_proto(part, role)
        if converted is not None:
            parts.append(converted)
    proto = content_pb2.Content(role=role, parts=parts) if parts else None
    if proto is None:
        return None, False
    # The context service names id-less function calls (for pairing with
    # their responses): such a content reads back from the ADK copy.
    exact = content_from_proto(proto) == content and all(
        p.function_call.id for p in proto.parts if p.WhichOneof("data") == "function_call")
    return proto, exact


def content_from_proto(content: content_pb2.Content) -> types.Content:
    parts = []
    for part in content.parts:
        which = part.WhichOneof("data")
        kwargs: dict[str, Any] = {}
        if part.thought:
            kwargs["thought"] = True
        if part.thought_signature:
            kwargs["thought_signature"] = part.thought_signature
        if which == "text":
            kwargs["text"] = part.text
        elif which == "inline_data":
            kwargs["inline_data"] = types.Blob(mime_type=part.inline_data.mime_type, data=part.inline_data.data)
        elif which == "file_data":
            kwargs["file_data"] = types.FileData(mime_type=part.file_data.mime_type or None,
                                                 file_uri=part.file_data.file_uri)
        elif which == "function_call":
            fc = part.function_call
            kwargs["function_call"] = types.FunctionCall(id=fc.id or None, name=fc.name, args=from_struct(fc.args))
        elif which == "function_response":
            fr = part.function_response
            kwargs["function_response"] = types.FunctionResponse(id=fr.id, name=fr.name,
                                                                 response=from_struct(fr.response))
        parts.append(types.Part(**kwargs))
    return types.Content(role=content.role, parts=parts)


# --- usage ------------------------------------------------------------------


def usage_to_proto(usage: types.GenerateContentResponseUsageMetadata | None) -> generation_pb2.Usage | None:
    if usage is None:
        return None
    return generation_pb2.Usage(
        prompt_tokens=max(usage.prompt_token_count or 0, 0),
        cached_prompt_tokens=max(usage.cached_content_token_count or 0, 0),
        output_tokens=max(usage.candidates_token_count or 0, 0),
        thoughts_tokens=max(usage.thoughts_token_count or 0, 0),
        total_tokens=max(usage.total_token_count or 0, 0),
    )


def usage_from_proto(usage: generation_pb2.Usage) -> types.GenerateContentResponseUsageMetadata:
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=usage.prompt_tokens, cached_content_token_count=usage.cached_prompt_tokens or None,
        candidates_token_count=usage.output_tokens, thoughts_token_count=usage.thoughts_tokens or None,
        total_token_count=usage.total_tokens,
    )


# --- finish reasons ---------------------------------------------------------

# agentctx's finish reasons, by the name ADK's (google.genai's) shares; ADK's
# others (BLOCKLIST, SPII, ...) have no agentctx value.
_FINISH = {name: types.FinishReason[name] for name in
           ("STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL", "OTHER")}


def finish_reason_from_name(name: str) -> types.FinishReason:
    """An agentctx finish reason's name as ADK's; one ADK does not share is OTHER."""
    return _FINISH.get(name, types.FinishReason.OTHER)


def finish_reason_from_proto(value: int) -> types.FinishReason | None:
    if not value:
        return None
    try:
        name = generation_pb2.FinishReason.Name(value).removeprefix("FINISH_REASON_")
    except ValueError:  # a value newer than these stubs
        return types.FinishReason.OTHER
    return finish_reason_from_name(name)


def _finish_reason_to_proto(name: str) -> generation_pb2.FinishReason | None:
    """agentctx's value of an ADK finish reason's name, None when it has none."""
    if name not in _FINISH:
        return None
    return cast(generation_pb2.FinishReason, generation_pb2.FinishReason.Value(f"FINISH_REASON_{name}"))


# --- events -----------------------------------------------------------------


def event_to_proto(event: Event) -> event_pb2.Event:
    """The agentctx event for an ADK event (its id must be set)."""
    data = event.model_dump(exclude_none=True, mode="json")
    rest = {k: v for k, v in data.items() if k not in _NATIVE}
    out = event_pb2.Event(id=event.id, partial=bool(event.partial), turn_complete=bool(event.turn_complete))
    if _LABEL.fullmatch(event.author or ""):
        out.author = event.author
    else:
        out.author = "adk"
        rest["author"] = event.author
    if event.invocation_id:
        if _LABEL.fullmatch(event.invocation_id):
            out.invocation_id = event.invocation_id
        else:
            rest["invocation_id"] = event.invocation_id
    if event.branch:
        if len(event.branch) <= 512 and _BRANCH.fullmatch(event.branch):
            out.branch = event.branch
        else:
            rest["branch"] = event.branch
    stamp = datetime.datetime.fromtimestamp(max(event.timestamp, 0.0), tz=datetime.UTC)
    out.create_time.FromDatetime(stamp)
    if stamp.timestamp() != event.timestamp:
        rest["timestamp"] = event.timestamp  # the exact float, not microseconds
    call_ids: set[str] = set()
    if event.content is not None:
        content, exact = content_to_proto(event.content, event.author)
        if content is not None:
            out.content.CopyFrom(content)
            call_ids = {p.function_call.id for p in content.parts if p.WhichOneof("data") == "function_call"}
        if not exact:
            rest["content"] = data.get("content")
    if event.long_running_tool_ids:
        native = sorted(i for i in event.long_running_tool_ids if i in call_ids)
        out.long_running_tool_ids.extend(native)
        if len(native) != len(event.long_running_tool_ids):
            rest["long_running_tool_ids"] = sorted(event.long_running_tool_ids)
    usage = usage_to_proto(event.usage_metadata)
    if usage is not None:
        out.usage.CopyFrom(usage)
    finish = _finish_reason_to_proto(rest.get("finish_reason", ""))
    if finish is not None:
        out.finish_reason = finish
        del rest["finish_reason"]
    for key in _NATIVE_STRINGS:
        if rest.get(key) and isinstance(rest[key], str):
            setattr(out, key, rest.pop(key))
    if rest:
        out.custom_metadata.update({ADK_KEY: rest})
    return out


def event_from_proto(proto: event_pb2.Event) -> Event:
    """The ADK event an agentctx event stores."""
    # Validated from JSON, as ADK's DatabaseSessionService reads its rows:
    # bytes in the dump are base64 text, which only JSON validation decodes.
    return Event.model_validate_json(event_json(proto))


def event_json(proto: event_pb2.Event) -> str:
    """The ADK event an agentctx event stores, as the JSON ADK validates."""
    custom = from_struct(proto.custom_metadata) if proto.HasField("custom_metadata") else {}
    rest = custom.get(ADK_KEY, {})
    data: dict[str, Any] = {
        "id": proto.id, "invocation_id": proto.invocation_id, "author": proto.author,
        "timestamp": proto.create_time.ToDatetime(tzinfo=datetime.UTC).timestamp(),
    }
    if proto.branch:
        data["branch"] = proto.branch
    if proto.long_running_tool_ids:
        data["long_running_tool_ids"] = sorted(proto.long_running_tool_ids)
    data.update(rest)
    for flag in ("partial", "turn_complete"):
        if getattr(proto, flag) and flag not in data:
            data[flag] = True
    finish = finish_reason_from_proto(proto.finish_reason)
    if finish is not None and "finish_reason" not in data:
        data["finish_reason"] = finish.value
    for key in _NATIVE_STRINGS:
        if getattr(proto, key) and key not in data:
            data[key] = getattr(proto, key)
    if "content" not in rest and proto.HasField("content"):
        data["content"] = content_from_proto(proto.content).model_dump(mode="json", exclude_none=True)
    return json.dumps(data)
