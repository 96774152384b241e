"""Proto <-> domain conversion for the cache service, with input checks.

Content goes to the canonical JSON shape of agentctx_common.canonical, so
the prefix fingerprint computed here equals the context service's. Every
conversion builds fresh objects: nothing the caller sent is shared with
what the registry keeps or a provider receives. With a ContentMemo, history
contents come from the memo (CanonicalContent, shared between requests and
never edited), so a content resent turn after turn is converted and hashed
once.
"""

from __future__ import annotations

import base64
from typing import Any, cast

from google.protobuf import struct_pb2

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, content_pb2, generation_pb2
from agentctx_common.canonical import content_json, struct_to_dict, tool_config_json, tool_json
from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.protos import unknown_field_violations, value_violations
from agentctx_common.reasons import Reason
from cache_service.api.content_memo import ContentMemo
from cache_service.domain.call_lease import CallLease
from cache_service.domain.keys import CanonicalContent, Prefix, Scope
from cache_service.domain.model import JSON, BypassReason, CacheInfo, CacheState, ModelCall, ModelReply
from cache_service.domain.ports import EmbedCall, Embeddings, EmbedTask
from cache_service.domain.routing import ProviderRouter

_ROLES = ("user", "model")
_FINISH = {
    "STOP": generation_pb2.FINISH_REASON_STOP,
    "MAX_TOKENS": generation_pb2.FINISH_REASON_MAX_TOKENS,
    "SAFETY": generation_pb2.FINISH_REASON_SAFETY,
    "RECITATION": generation_pb2.FINISH_REASON_RECITATION,
    "MALFORMED_FUNCTION_CALL": generation_pb2.FINISH_REASON_MALFORMED_FUNCTION_CALL,
}


# A message's bytes as received: the buffer, and where the message lies in it.
Received = tuple[bytes, int, int]


def _fail(violations: list[FieldViolation]) -> None:
    if violations:
        raise InvalidArgument.fields(violations)


# --- scope -----------------------------------------------------------------------


def scope_from_proto(
    s: pb.CacheScope, router: ProviderRouter, *, model: str = "", require_identity: bool = True, path: str = "scope"
) -> Scope:
    """A scope; ``model`` fills an empty scope model (GenerateContent), and
    an uncached call may leave app and user empty. A scope that names no
    provider gets the one the routing table gives its model."""
    violations = unknown_field_violations(s, path)
    provider = s.provider or router.provider_for(s.model or model)
    if provider not in router.known:
        violations.append(FieldViolation(f"{path}.provider", f"must be one of {', '.join(sorted(router.known))}"))
    for name in ("app", "user"):
        if require_identity and not getattr(s, name):
            violations.append(FieldViolation(f"{path}.{name}", "is required"))
    scope_model = s.model or model
    if not scope_model:
        violations.append(FieldViolation(f"{path}.model", "is required"))
    elif model and s.model and s.model != model:
        violations.append(FieldViolation("request.model", "must equal scope.model"))
    _fail(violations)
    return Scope(provider, s.app, s.user, scope_model, struct_to_dict(s.policy))


# --- content ---------------------------------------------------------------------


def _content_violations(c: content_pb2.Content, path: str, *, role_free: bool = False) -> list[FieldViolation]:
    out = []
    if not role_free and c.role not in _ROLES:
        out.append(FieldViolation(f"{path}.role", "must be user or model"))
    if not c.parts:
        out.append(FieldViolation(f"{path}.parts", "must not be empty"))
    for i, p in enumerate(c.parts):
        if p.WhichOneof("data") is None:
            out.append(FieldViolation(f"{path}.parts[{i}]", "exactly one of text, inline_data, file_data, "
                                                            "function_call, function_response must be set"))
    return out


def _contents(parent: Any, field: str, path: str, memo: ContentMemo | None,
              received: Received | None = None) -> tuple[JSON, ...]:
    """``parent.<field>`` (a repeated Content) converted, through the memo
    when there is one (``received``: where ``parent`` lies in the bytes it
    was parsed from, when known)."""
    contents = getattr(parent, field)
    violations: list[FieldViolation] = []
    if memo is None:
        for i, c in enumerate(contents):
            violations += _content_violations(c, f"{path}[{i}]")
        _fail(violations)
        return tuple(content_json(c) for c in contents)
    keys, region, known = _content_keys(parent, field, contents, memo, received)
    n = len(known)
    if n:
        memo.touch(keys[:n])
    rest = memo.get_many(keys[n:])
    evicted = memo.evicted
    held = True
    # Only the missing contents are read from the message (each read makes a
    # Python object of it).
    missing = [n + j for j, found in enumerate(rest) if found is None]
    for i in missing:
        c = contents[i]
        bad = _content_violations(c, f"{path}[{i}]")
        if bad:
            violations += bad
            continue
        new = rest[i - n] = CanonicalContent(content_json(c))
        held = memo.put(keys[i], new) and held
    _fail(violations)
    # Every slot now holds a content: a missing one failed above.
    out = cast("tuple[CanonicalContent, ...]", (*known, *rest))
    # A run holds only what the memo holds: none when this call's own puts
    # let a content (perhaps one of its own) go.
    if region is not None and held and memo.evicted == evicted:
        memo.keep_run(region, keys, out)
    return out


def _content_keys(
    parent: Any, field: str, contents: Any, memo: ContentMemo | None = None, received: Received | None = None
) -> tuple[list[bytes], memoryview | None, tuple[CanonicalContent, ...]]:
    """Each content's memo key: its bytes in ``parent``'s serialization,
    and the contents' bytes end to end (a run for the memo), None when
    they are not contiguous, and the first contents, known from a run of
    the memo. Cut out of one serialization, which holds each content's
    exact bytes: one scan of the parent's top-level fields instead of a
    serialization per content (several times dearer at a thousand
    contents); the part of the scan a known run covers is skipped.

    That serialization is the bytes ``parent`` was parsed from when the
    caller has them (``received``: the servicer's deserializer keeps a
    request's bytes), so nothing is serialized; else ``parent``'s
    deterministic serialization (map entries, Struct fields, in key order).
    Either way equal keys are equal bytes, which parse to equal contents."""
    number = parent.DESCRIPTOR.fields_by_name[field].number
    if received is None:
        data = parent.SerializeToString(deterministic=True)
        scanned = _field_scan(data, number, memo)
    else:
        data, begin, end = received
        scanned = _field_scan(data, number, memo, begin, end)
    if scanned is None or len(scanned[0]) != len(contents):
        return [c.SerializeToString(deterministic=True) for c in contents], None, ()
    keys, start, end, contiguous, known = scanned
    # A view: the run keeps the buffer, not a copy of most of it.
    return keys, memoryview(data)[start:end] if contiguous and keys else None, known


def received_field(data: bytes | None, *numbers: int) -> Received | None:
    """Where the message at the path of field ``numbers`` (each a singular
    message field) lies in the serialized message ``data``; None when
    ``data`` is None or a field on the path is not there exactly once (a
    parser merges repeated occurrences: no one span holds the result)."""
    if data is None:
        return None
    view = memoryview(data)  # payloads as views: no copy of what they hold
    begin, end = 0, len(data)
    for number in numbers:
        scanned = _field_scan(view, number, None, begin, end)
        if scanned is None or len(scanned[0]) != 1:
            return None
        end = scanned[2]
        begin = end - len(scanned[0][0])
    return data, begin, end


def repeated_field_bytes(data: bytes, number: int) -> list[bytes] | None:
    """The payloads of the length-delimited top-level fields ``number`` of
    a serialized message, in order; None on anything but the wire types of
    a plain message (a group, a malformed tag)."""
    scanned = _field_scan(data, number, None)
    return None if scanned is None else scanned[0]


def _field_scan(
    data: Any, number: int, memo: ContentMemo | None, begin: int = 0, end: int = -1
) -> tuple[list[Any], int, int, bool, tuple[CanonicalContent, ...]] | None:
    """``repeated_field_bytes`` of the message in ``data[begin:end]`` (to
    its end when ``end`` is -1), with where the first entry starts and the
    last ends in ``data`` and whether nothing else lies between. At the
    first entry, a run of the memo that starts with its payload and whose
    bytes the data holds there gives its keys and contents (returned last),
    and the scan goes on after it. ``data`` is bytes, or a memoryview
    (payloads are then views)."""
    known: tuple[CanonicalContent, ...] = ()
    out: list[Any] = []
    append = out.append
    if end < 0:
        end = len(data)
    i = begin
    first = last = -1
    contiguous = True
    try:
        while i < end:
            at = i
            tag = data[i]
            i += 1
            if tag > 0x7F:
                tag &= 0x7F
                shift = 7
                while True:
                    b = data[i]
                    i += 1
                    tag |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
            kind = tag & 7
            if kind == 2:
                size = data[i]
                i += 1
                if size > 0x7F:
                    size &= 0x7F
                    shift = 7
                    while True:
                        b = data[i]
                        i += 1
                        size |= (b & 0x7F) << shift
                        if b < 0x80:
                            break
                        shift += 7
                if tag >> 3 == number:
                    payload = data[i:i + size]
                    i += size
                    if first < 0:
                        first = at
                        run = memo.run(payload) if memo is not None else None
                        if run is not None and data.startswith(run[0], at):
                            out += run[1]
                            known = run[2]
                            i = at + len(run[0])
                            last = i
                            continue
                    elif last != at:
                        contiguous = False
                    append(payload)
                    last = i
                    continue
                i += size
            elif kind == 0:
                while data[i] > 0x7F:
                    i += 1
                i += 1
            elif kind == 1:
                i += 8
            elif kind == 5:
                i += 4
            else:
                return None
    except IndexError:
        return None
    if i != end:  # past the end (an index past ``end`` may still be in ``data``)
        return None
    return out, first, last, contiguous, known


def _system_instruction(msg: Any, path: str) -> JSON | None:
    if not msg.HasField("system_instruction"):
        return None
    _fail(_content_violations(msg.system_instruction, path, role_free=True))
    # Role kept as sent: it is part of the canonical prefix both services hash.
    return content_json(msg.system_instruction)


def _tools(msg: Any) -> tuple[tuple[JSON, ...], JSON | None]:
    tools = tuple(tool_json(t) for t in msg.tools)
    config = tool_config_json(msg.tool_config) if msg.HasField("tool_config") else None
    return tools, config


def prefix_from_proto(p: pb.CachePrefix, model: str, memo: ContentMemo | None = None,
                      received: Received | None = None) -> Prefix:
    _fail(value_violations(p, "prefix"))
    tools, tool_config = _tools(p)
    return Prefix(
        model=model,
        system_instruction=_system_instruction(p, "prefix.system_instruction"),
        tools=tools,
        tool_config=tool_config,
        history=_contents(p, "history", "prefix.history", memo, received),
    )


def _generation_config(g: generation_pb2.GenerationConfig) -> JSON:
    out: JSON = {}
    for field, key in (("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK"),
                       ("max_output_tokens", "maxOutputTokens"), ("seed", "seed")):
        if g.HasField(field):
            out[key] = getattr(g, field)
    if g.stop_sequences:
        out["stopSequences"] = list(g.stop_sequences)
    if g.response_mime_type:
        out["responseMimeType"] = g.response_mime_type
    return out


def call_from_proto(r: generation_pb2.ModelRequest, memo: ContentMemo | None = None,
                    received: Received | None = None) -> ModelCall:
    """``received``: where ``r`` lies in the bytes it was parsed from, when
    known (its contents' memo keys are cut from them)."""
    if not r.model:
        raise InvalidArgument.fields([FieldViolation("request.model", "is required")])
    if not r.contents:
        raise InvalidArgument.fields([FieldViolation("request.contents", "must not be empty")])
    # Unknown enum numbers (tool_config.mode, ...) would fail conversion.
    _fail(value_violations(r, "request"))
    tools, tool_config = _tools(r)
    return ModelCall(
        model=r.model,
        contents=_contents(r, "contents", "request.contents", memo, received),
        system_instruction=_system_instruction(r, "request.system_instruction"),
        tools=tools,
        tool_config=tool_config,
        generation_config=_generation_config(r.generation_config),
    )


def ttl_seconds(r: pb.AcquireLeaseRequest | pb.CallLease, path: str = "ttl") -> float | None:
    if not r.HasField("ttl"):
        return None
    seconds = r.ttl.ToNanoseconds() / 1e9
    if seconds < 0:
        raise InvalidArgument.fields([FieldViolation(path, "must not be negative")])
    return seconds or None


def call_lease_from_proto(r: pb.GenerateContentRequest, contents: int) -> CallLease | None:
    """The lease a call acquires for itself, if it asks for one."""
    if not r.HasField("acquire"):
        return None
    a = r.acquire
    violations = []
    if r.lease:
        violations.append(FieldViolation("acquire", "must not be set with lease"))
    if not 1 <= a.suffix_contents <= contents:
        violations.append(FieldViolation("acquire.suffix_contents", "must be between 1 and the number of contents"))
    _fail(violations)
    return CallLease(a.suffix_contents, ttl_seconds(a, "acquire.ttl"), a.holder)


# --- replies ---------------------------------------------------------------------


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text) if text else b""


def _struct(value: Any) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    if isinstance(value, dict):
        s.update(value)
    return s


def part_to_proto(d: JSON) -> content_pb2.Part:
    p = content_pb2.Part()
    if "text" in d:
        p.text = d["text"]
    elif "inlineData" in d:
        p.inline_data.mime_type = d["inlineData"].get("mimeType", "")
        p.inline_data.data = _b64decode(d["inlineData"].get("data", ""))
    elif "fileData" in d:
        p.file_data.mime_type = d["fileData"].get("mimeType", "")
        p.file_data.file_uri = d["fileData"].get("fileUri", "")
    elif "functionCall" in d:
        fc = d["functionCall"]
        p.function_call.id = fc.get("id") or ""
        p.function_call.name = fc.get("name") or ""
        p.function_call.args.CopyFrom(_struct(fc.get("args")))
    elif "functionResponse" in d:
        fr = d["functionResponse"]
        p.function_response.id = fr.get("id") or ""
        p.function_response.name = fr.get("name") or ""
        p.function_response.response.CopyFrom(_struct(fr.get("response")))
    if d.get("thought"):
        p.thought = True
    if d.get("thoughtSignature"):
        p.thought_signature = _b64decode(d["thoughtSignature"])
    return p


def reply_to_proto(r: ModelReply, out: generation_pb2.ModelResponse) -> None:
    if r.content is not None:
        out.content.role = r.content.get("role") or "model"
        out.content.parts.extend(part_to_proto(p) for p in r.content.get("parts", ()))
    if r.finish_reason:
        out.finish_reason = _FINISH.get(r.finish_reason, generation_pb2.FINISH_REASON_OTHER)
    if r.usage is not None:
        u = r.usage
        out.usage.prompt_tokens = u.prompt_tokens
        out.usage.cached_prompt_tokens = u.cached_prompt_tokens
        out.usage.output_tokens = u.output_tokens
        out.usage.thoughts_tokens = u.thoughts_tokens
        out.usage.total_tokens = u.total_tokens
        out.usage.cache_write_tokens = u.cache_write_tokens
    out.model_version = r.model_version


_STATES: dict[CacheState, cache_pb2.CacheState] = {
    s: getattr(cache_pb2, f"CACHE_STATE_{s.value}") for s in CacheState
}
_BYPASS_REASONS: dict[BypassReason, cache_pb2.CacheBypassReason] = {
    r: getattr(cache_pb2, f"CACHE_BYPASS_REASON_{r.value}") for r in BypassReason
}


def info_to_proto(i: CacheInfo, out: cache_pb2.CacheMetadata) -> None:
    out.state = _STATES[i.state]
    out.bypass_reason = _BYPASS_REASONS[i.bypass_reason]
    out.prefix_fingerprint = i.prefix_fingerprint
    out.prefix_tokens = i.prefix_tokens
    if i.expire_time is not None:
        out.expire_time.FromNanoseconds(int(i.expire_time * 1e9))
    out.scope_fingerprint = i.scope_fingerprint
    out.uses = i.uses


# --- embeddings ------------------------------------------------------------------

_EMBED_TASKS = {
    pb.EMBED_TASK_UNSPECIFIED: EmbedTask.UNSPECIFIED,
    pb.EMBED_TASK_RETRIEVAL_DOCUMENT: EmbedTask.RETRIEVAL_DOCUMENT,
    pb.EMBED_TASK_RETRIEVAL_QUERY: EmbedTask.RETRIEVAL_QUERY,
}


def embed_from_proto(r: pb.EmbedRequest, router: ProviderRouter) -> tuple[str, EmbedCall]:
    """The provider instance and the call (INVALID_ARGUMENT INVALID_EMBED_REQUEST
    for an unknown provider, task or negative dimensions)."""
    violations = []
    if r.task not in _EMBED_TASKS:
        violations.append(FieldViolation("task", f"unknown task {r.task}"))
    if r.dimensions < 0:
        violations.append(FieldViolation("dimensions", "must not be negative"))
    if not r.model:
        violations.append(FieldViolation("model", "is required"))
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_EMBED_REQUEST)
    provider = r.provider or router.provider_for(r.model)
    if provider not in router.known:
        raise InvalidArgument.fields([FieldViolation("provider", f"must be one of {', '.join(sorted(router.known))}")],
                                     reason=Reason.INVALID_EMBED_REQUEST)
    return provider, EmbedCall(r.model, tuple(r.texts), _EMBED_TASKS[r.task], r.dimensions or None)


def embeddings_to_proto(model: str, result: Embeddings) -> pb.EmbedResponse:
    out = pb.EmbedResponse(model=model, input_tokens=result.input_tokens)
    for vector in result.vectors:
        out.embeddings.add().values.extend(vector)
    return out
