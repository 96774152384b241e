"""BuildContext and Generate requests to ``building.BuildRequest``, and a
``building.BuiltContext`` to the BuildContextResponse (as a message or as
pre-serialized bytes) and to the ModelRequest a turn sends.

The response is assembled from cached wire bytes: every stored content's
encoding is kept with its record (``mapping.wire.Rendered``), so a response
is a concatenation, not a tree of messages built, copied and serialized
again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from agentctx.context.v1 import artifacts_pb2
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common import canonical
from agentctx_common.errors import InvalidArgument
from agentctx_common.protos import unknown_field_violations, value_violations
from agentctx_common.reasons import Reason
from context_service.building.types import BuildRequest, BuiltContext, RequestContent, RequestSettings
from context_service.domain import attachments as att
from context_service.domain import selection as sel
from context_service.domain.config import SelectionPolicy
from context_service.domain.model import Event
from context_service.domain.validation import selection_violations
from context_service.mapping.convert import content_from_proto, selection_from_proto
from context_service.mapping.wire import Rendered, field_head, wire_field

_MEMO_MAX = 512


@dataclass(frozen=True, slots=True)
class EncodedSettings:
    """``RequestSettings.rendered``: the messages as sent, and their wire
    bytes as ModelRequest fields 4-6."""

    tools: tuple[generation_pb2.Tool, ...] = ()
    tool_config: generation_pb2.ToolConfig | None = None
    generation_config: generation_pb2.GenerationConfig | None = None
    wire: bytes = b""


_NO_SETTINGS = EncodedSettings()


class RequestMapper:
    """Maps requests, remembering what agents send unchanged call after
    call (instruction, tools, tool config, generation config) by their wire
    bytes, so those are converted once."""

    def __init__(self) -> None:
        self._memo: dict[Any, Any] = {}

    def build_request(self, request: pb.BuildContextRequest) -> BuildRequest:
        refs = attachment_refs(request.attachments, Reason.INVALID_BUILD_CONTEXT_REQUEST, "attachments")
        return self._map(request, [RequestContent(content_from_proto(c), Rendered(c)) for c in request.input], refs)

    def generate_request(self, request: pb.GenerateRequest, inputs: Sequence[Event], prefix: str = "") -> BuildRequest:
        """The context a turn sends: its input events' contents (already
        converted and validated) as the current input."""
        refs = attachment_refs(request.attachments, Reason.INVALID_GENERATE_REQUEST, f"{prefix}attachments")
        return self._map(request, [RequestContent(e.content) for e in inputs if e.content is not None], refs)

    def _map(self, request: pb.BuildContextRequest | pb.GenerateRequest, inputs: list[RequestContent],
             attachments: tuple[att.AttachmentRef, ...]) -> BuildRequest:
        policy = call_policy(request)
        return BuildRequest(
            model=request.model,
            system_instruction=self._instruction(request.system_instruction)
            if request.HasField("system_instruction") else None,
            settings=self._settings(request),
            memory=[RequestContent(content_from_proto(c), Rendered(c)) for c in request.memory],
            inputs=inputs,
            policy=policy,
            attachments=attachments,
        )

    def _remember(self, slot: Any, value: Any) -> None:
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[slot] = value

    def _instruction(self, si: content_pb2.Content) -> RequestContent:
        identity = si.SerializeToString()
        slot = ("instruction", identity)
        hit: RequestContent | None = self._memo.get(slot)
        if hit is None:
            hit = RequestContent(content_from_proto(si), Rendered(si), identity)
            self._remember(slot, hit)
        return hit

    def _settings(self, request: pb.BuildContextRequest | pb.GenerateRequest) -> RequestSettings:
        tools = tuple(t.SerializeToString() for t in request.tools)
        tool_config = request.tool_config.SerializeToString() if request.HasField("tool_config") else None
        generation = request.generation_config.SerializeToString() if request.HasField("generation_config") else None
        slot = ("settings", tools, tool_config, generation)
        hit: RequestSettings | None = self._memo.get(slot)
        if hit is not None:
            return hit
        wires = [wire_field(4, t) for t in tools]
        if tool_config is not None:
            wires.append(wire_field(5, tool_config))
        if generation is not None:
            wires.append(wire_field(6, generation))
        encoded = EncodedSettings(
            tools=tuple(request.tools),
            tool_config=request.tool_config if tool_config is not None else None,
            generation_config=request.generation_config if generation is not None else None,
            wire=b"".join(wires),
        )
        settings = RequestSettings(
            tools=tuple(canonical.canonical_json(canonical.tool_json(t)) for t in request.tools),
            tool_config=canonical.canonical_json(canonical.tool_config_json(request.tool_config))
            if tool_config is not None else None,
            generation_config=canonical.canonical_json(json_format.MessageToDict(request.generation_config))
            if generation is not None else None,
            rendered=encoded,
        )
        self._remember(slot, settings)
        return settings


def attachment_refs(
    refs: Sequence[artifacts_pb2.ArtifactRef], reason: Reason, path: str
) -> tuple[att.AttachmentRef, ...]:
    """The request's attachments, validated (INVALID_ARGUMENT ``reason``)."""
    out = tuple(att.AttachmentRef(r.name, r.version if r.HasField("version") else None) for r in refs)
    att.check_refs(out, reason, path)
    return out


def call_policy(request: pb.BuildContextRequest | pb.GenerateRequest) -> SelectionPolicy | None:
    """The per-call override, or None. Unknown fields in the policy (from a
    newer or different schema), unknown enum numbers and impossible
    timestamps are INVALID_ARGUMENT: ignoring them would change what the
    caller asked for."""
    violations = []
    if request.HasField("tool_config"):
        violations += value_violations(request.tool_config, "tool_config")
    if request.HasField("policy"):
        violations += unknown_field_violations(request.policy, "policy") + value_violations(request.policy, "policy")
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_BUILD_CONTEXT_REQUEST)
    if not request.HasField("policy"):
        return None
    call = selection_from_proto(request.policy)
    violations = selection_violations(call, "policy")
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_SELECTION_POLICY)
    return call


# --- the built context out ------------------------------------------------------


def _encoded(settings: RequestSettings) -> EncodedSettings:
    encoded = settings.rendered
    if isinstance(encoded, EncodedSettings):
        return encoded
    if encoded is None and not settings.tools and settings.tool_config is None and settings.generation_config is None:
        return _NO_SETTINGS
    raise TypeError("request settings without their transport form (map requests with RequestMapper)")


def _rendered(record: sel.ContentRecord) -> Rendered:
    rendered = record.rendered
    assert isinstance(rendered, Rendered), "records are rendered by mapping.wire.render"
    return rendered


def model_request(built: BuiltContext) -> generation_pb2.ModelRequest:
    """The model request as a message (made once per built context)."""
    out: generation_pb2.ModelRequest | None = built.encoded.get("model_request")
    if out is not None:
        return out
    out = generation_pb2.ModelRequest(model=built.parts.model)
    if built.parts.system_instruction is not None:
        out.system_instruction.CopyFrom(_rendered(built.parts.system_instruction).proto)
    out.contents.extend([_rendered(r).proto for r in built.contents()])
    settings = _encoded(built.settings)
    out.tools.extend(settings.tools)
    if settings.tool_config is not None:
        out.tool_config.CopyFrom(settings.tool_config)
    if settings.generation_config is not None:
        out.generation_config.CopyFrom(settings.generation_config)
    built.encoded["model_request"] = out
    return out


def response_message(built: BuiltContext) -> pb.BuildContextResponse:
    response = pb.BuildContextResponse()
    response.request.CopyFrom(model_request(built))
    response.accounting.CopyFrom(accounting_to_proto(built.accounting))
    return response


def response_wire(built: BuiltContext) -> bytes:
    """The serialized BuildContextResponse, the same message as
    ``response_message``, assembled from cached wire bytes."""
    accounting = accounting_to_proto(built.accounting).SerializeToString()
    chunks = model_request_chunks(built)
    return b"".join([field_head(1, sum(map(len, chunks))), *chunks, wire_field(2, accounting)])


def model_request_chunks(built: BuiltContext) -> list[bytes | memoryview]:
    """The serialized ModelRequest, the same message as ``model_request``,
    in pieces of cached wire bytes, joined once into the message that holds
    it (BuildContext's response, and the GenerateContent call a turn sends,
    ``cache_client.call_request``), not joined and then copied into it."""
    # Every record's ``rendered`` is a ``Rendered`` (records are made with
    # ``wire.render``, or reuse the request's own, see RequestMapper).
    parts, selection = built.parts, built.selection
    chunks: list[bytes | memoryview] = []
    if parts.model:
        chunks.append(wire_field(1, parts.model.encode()))
    if parts.system_instruction is not None:
        chunks.append(parts.system_instruction.rendered.instruction_wire)
    if selection.paired is not None:
        chunks += [c.rendered.wire for c in selection.paired]
    else:
        if selection.summary is not None:
            chunks.append(selection.summary.rendered.wire)
        chunks += _events_wire(selection)
    chunks += [c.rendered.wire for c in parts.current]
    chunks.append(_encoded(built.settings).wire)
    return chunks


def _wire_layout(bodies: Sequence[sel.ContentRecord], older: list[bytes] | None) -> list[bytes]:
    """The bodies' cached wire bytes, in order, extending the list of a
    shorter history when there is one (the bytes are joined once, into
    the message that holds them, never into a blob per history)."""
    wires = older.copy() if older is not None else []
    wires += [_rendered(b).wire for b in bodies[len(wires):]]
    return wires


def _events_wire(selection: sel.Selection) -> list[bytes]:
    """The selected events' cached wire bytes, listed once per history
    and extended after an append (``Grouping.derive``)."""
    g = selection.grouping
    assert g is not None
    wires: list[bytes] = g.derive("wire", _wire_layout)
    return wires[selection.first_event:]


_SECTIONS = ("instructions", "settings", "history", "memory", "input", "attachments", "tools", "framing", "request")
_SCALARS = (
    "events_seen", "events_filtered", "events_selected", "units_selected", "units_dropped", "secrets_pruned",
    "bytes_per_token", "calibrated", "prefix_fingerprint", "selection_fingerprint", "envelope_fingerprint",
    "compaction_sequence", "last_sequence", "compressed",
)


def accounting_to_proto(a: sel.Accounting) -> pb.ContextAccounting:
    fields: dict[str, Any] = {name: getattr(a, name) for name in _SCALARS}
    for name in _SECTIONS:
        section = getattr(a, name)
        fields[name] = pb.BudgetSection(bytes=section.bytes, tokens=section.tokens)
    return pb.ContextAccounting(**fields)
