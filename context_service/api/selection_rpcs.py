"""SelectionRpcs: BuildContext, the bounded, secret-pruned request for one
model call. Read-only.

The servicer only converts and orchestrates: authorize, read the session,
overlay and validate the policy, load the cached history records, then the
pure pipeline in ``context_service.domain.selection`` (select, optionally
compress, account).

The RPC answers with pre-serialized bytes: every stored content's wire
encoding is cached with its record (``history.Rendered``), so a response is
a concatenation, not a tree of messages built, copied and serialized again
(``register_raw_build_context`` installs the pass-through serializer).
In-process callers (Generate) use ``build_context``, which returns the
message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import json_format

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2
from agentctx_common import canonical
from agentctx_common.errors import FieldViolation, InvalidArgument, ResourceExhausted
from agentctx_common.protos import unknown_field_violations, value_violations
from agentctx_common.reasons import Reason
from context_service.api.convert import content_from_proto, selection_from_proto
from context_service.domain import selection as sel
from context_service.domain.config import ContextConfig, SelectionPolicy
from context_service.domain.selection import telemetry
from context_service.domain.selection.errors import compress_not_available
from context_service.domain.sessions import content_violations, parse_session_name
from context_service.domain.validation import selection_violations
from context_service.history import HistoryView, Rendered, render, wire_field

log = logging.getLogger("agentctx.context.selection")


SERVICE = pb.DESCRIPTOR.services_by_name["ContextService"].full_name


class SelectionRpcs:
    app: Any

    async def BuildContext(self, request: pb.BuildContextRequest, context: Any) -> bytes:
        app = self.app
        key = parse_session_name(request.session, app.limits, "session")
        await app.authorize(context, key.app)
        session = await app.history.head(app.sessions, key)
        built = await _build(app, session, request, context.time_remaining())
        wire = built.wire()
        if len(wire) > app.settings.max_message_bytes:
            # Said with figures here rather than as a bare transport error.
            raise ResourceExhausted(
                "the built context is larger than the largest response this server sends; "
                "set max_bytes or max_request_bytes",
                reason=Reason.RESPONSE_TOO_LARGE,
                metadata={"response_bytes": len(wire), "max_message_bytes": app.settings.max_message_bytes},
            )
        return wire


def register_raw_build_context(server: Any, servicer: SelectionRpcs) -> None:
    """Serves BuildContext with a serializer that passes the handler's
    pre-serialized bytes through. Call after the generated registration:
    registered method handlers replace it by method name."""
    handler = grpc.unary_unary_rpc_method_handler(
        servicer.BuildContext,
        request_deserializer=pb.BuildContextRequest.FromString,
        response_serializer=_pass_through,
    )
    server.add_registered_method_handlers(SERVICE, {"BuildContext": handler})


def _pass_through(response: Any) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()


async def build_context(
    app: Any,
    session: Any,
    request: pb.BuildContextRequest,
    *,
    remaining: float | None = None,
    exclude_events: frozenset[str] = frozenset(),
) -> pb.BuildContextResponse:
    """BuildContext for an authorized caller and a session already read: a
    ``history.SessionHead`` (Generate can pass ``head_of(record)`` for the
    record it just wrote). ``request.session`` is not read. ``remaining``:
    seconds left for an overflow COMPRESS summary. ``exclude_events``: ids
    of stored events to leave out of the history (Generate's own input
    events, already appended, which it sends as the current input)."""
    return (await _build(app, session, request, remaining, exclude_events)).message()


@dataclass(frozen=True, slots=True)
class _Static:
    """What agents send unchanged call after call (instruction, tools, tool
    config, generation config), worked out once: canonical forms for the
    accounting and wire bytes for the response."""

    system_instruction: sel.ContentRecord | None
    tools: list[bytes]
    tool_config: bytes | None
    generation_config: bytes | None
    wire_instruction: bytes
    wire_settings: bytes


@dataclass(frozen=True, slots=True)
class _Built:
    request: pb.BuildContextRequest
    parts: sel.RequestParts
    static: _Static
    selection: sel.Selection
    accounting: sel.Accounting
    memo: dict

    def contents(self) -> list[Rendered]:
        return [
            *(c.rendered for c in self.parts.memory),
            *(c.rendered for c in self.selection.history),
            *(c.rendered for c in self.parts.inputs),
        ]

    def message(self) -> pb.BuildContextResponse:
        request, parts = self.request, self.parts
        response = pb.BuildContextResponse()
        out = response.request
        out.model = parts.model
        if parts.system_instruction is not None:
            out.system_instruction.CopyFrom(parts.system_instruction.rendered.proto)
        out.contents.extend([r.proto for r in self.contents()])
        out.tools.extend(request.tools)
        if request.HasField("tool_config"):
            out.tool_config.CopyFrom(request.tool_config)
        if request.HasField("generation_config"):
            out.generation_config.CopyFrom(request.generation_config)
        response.accounting.CopyFrom(_accounting_to_proto(self.accounting))
        return response

    def wire(self) -> bytes:
        """The serialized BuildContextResponse, the same message as
        ``message()``, assembled from cached wire bytes."""
        parts, selection = self.parts, self.selection
        chunks: list[bytes | memoryview] = []
        if parts.model:
            chunks.append(wire_field(1, parts.model.encode()))
        chunks.append(self.static.wire_instruction)
        chunks += [c.rendered.wire for c in parts.memory]
        if selection.summary is not None:
            chunks.append(selection.summary.rendered.wire)
        chunks.append(_events_wire(self.memo, selection))
        chunks += [c.rendered.wire for c in parts.inputs]
        chunks.append(self.static.wire_settings)
        accounting = _accounting_to_proto(self.accounting).SerializeToString()
        return wire_field(1, b"".join(chunks)) + wire_field(2, accounting)


def _events_wire(memo: dict, selection: sel.Selection) -> bytes | memoryview:
    """The selected events' cached wire bytes, laid out once per grouping
    (the memo is emptied whenever the history changes)."""
    g = selection.grouping
    assert g is not None
    slot = ("wire", id(g))
    layout = memo.get(slot)
    if layout is None or layout[0] is not g:
        wires = [r.body.rendered.wire for r in g.units.events]
        offsets, at = [], 0
        for w in wires:
            offsets.append(at)
            at += len(w)
        layout = memo[slot] = (g, b"".join(wires), offsets)
    _, blob, offsets = layout
    first = selection.first_event
    return memoryview(blob)[offsets[first]:] if first < len(offsets) else b""


async def _build(
    app: Any, session: Any, request: pb.BuildContextRequest, remaining: float | None,
    exclude_events: frozenset[str] = frozenset(),
) -> _Built:
    call_policy = _call_policy(request)
    config, policy, keys = _effective(app, session.config, call_policy)
    inputs, memory = _contents(request, keys, app.limits)
    static = _static(app, request, keys)
    view = await app.history.load(app.sessions, session, keys)
    if exclude_events:
        records = [r for r in view.records if r.event_id not in exclude_events]
        # A memo of its own: the view's memo describes the full record list.
        view = HistoryView(records, sel.latest_compaction(records))

    with telemetry.build_span(policy) as build_span:
        selection = sel.select(view.records, inputs, policy, compaction_index=view.compaction_index, memo=view.memo)
        if selection.pending is not None:
            # Compaction provides the summarizer; without it COMPRESS is unavailable.
            compaction = getattr(app, "compaction_service", None)
            if compaction is None:
                raise compress_not_available()
            compressor = await compaction.compressor(session.key, config, remaining=remaining)
            summary = await compressor(selection.pending)
            selection = sel.finish_compression(selection, summary, keys, render)
        with telemetry.envelope_span() as envelope_span:
            parts = sel.RequestParts(
                model=request.model or config.model,
                system_instruction=static.system_instruction,
                tools=static.tools,
                tool_config=static.tool_config,
                generation_config=static.generation_config,
                memory=memory,
                inputs=inputs,
            )
            accounting = sel.account(selection, parts, policy)
            telemetry.record(build_span, envelope_span, accounting)
    log.debug(
        "context built",
        extra={
            "events_selected": accounting.events_selected, "request_bytes": accounting.request.bytes,
            "envelope_fingerprint": accounting.envelope_fingerprint,
        },
    )
    return _Built(request, parts, static, selection, accounting, view.memo)


def _call_policy(request: pb.BuildContextRequest) -> SelectionPolicy | None:
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


@dataclass(frozen=True, slots=True)
class _Effective:
    stored: ContextConfig
    config: ContextConfig
    policy: SelectionPolicy
    keys: sel.SecretKeys


_MEMO_MAX = 512


def _effective(
    app: Any, stored: ContextConfig, call: SelectionPolicy | None
) -> tuple[ContextConfig, SelectionPolicy, sel.SecretKeys]:
    """Effective config, policy and key set. The session head reader hands
    back the same config object until the config changes, so the overlay,
    validation and key set are worked out once per (config, override)."""
    memo = app.history.memo
    slot = ("policy", id(stored), call)
    hit = memo.get(slot)
    if hit is not None and hit.stored is stored:
        return hit.config, hit.policy, hit.keys
    config = app.effective_config(stored)
    policy = sel.effective_policy(config.selection, call)
    violations = selection_violations(policy, "policy")
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_SELECTION_POLICY)
    keys = sel.secret_keys(policy)
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[slot] = _Effective(stored, config, policy, keys)
    return config, policy, keys


def _static(app: Any, request: pb.BuildContextRequest, keys: sel.SecretKeys) -> _Static:
    """The request's unchanging parts, remembered per app by their wire
    bytes (a different encoding of equal values only costs a miss)."""
    si = request.system_instruction.SerializeToString() if request.HasField("system_instruction") else None
    tools = tuple(t.SerializeToString() for t in request.tools)
    tool_config = request.tool_config.SerializeToString() if request.HasField("tool_config") else None
    generation = request.generation_config.SerializeToString() if request.HasField("generation_config") else None
    memo = app.history.memo
    slot = ("static", keys.fingerprint, si, tools, tool_config, generation)
    hit = memo.get(slot)
    if hit is not None:
        return hit
    instruction = _record(request.system_instruction, keys) if si is not None else None
    settings = [wire_field(4, t) for t in tools]
    if tool_config is not None:
        settings.append(wire_field(5, tool_config))
    if generation is not None:
        settings.append(wire_field(6, generation))
    static = _Static(
        system_instruction=instruction,
        tools=[canonical.canonical_json(canonical.tool_json(t)) for t in request.tools],
        tool_config=canonical.canonical_json(canonical.tool_config_json(request.tool_config)) if tool_config is not None else None,
        generation_config=canonical.canonical_json(json_format.MessageToDict(request.generation_config))
        if generation is not None
        else None,
        wire_instruction=wire_field(2, instruction.rendered.proto.SerializeToString()) if instruction is not None else b"",
        wire_settings=b"".join(settings),
    )
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[slot] = static
    return static


def _contents(
    request: pb.BuildContextRequest, keys: sel.SecretKeys, limits: Any
) -> tuple[list[sel.ContentRecord], list[sel.ContentRecord]]:
    """Validated, pruned records of the current input and the memory."""
    violations: list[FieldViolation] = []
    out: dict[str, list[sel.ContentRecord]] = {"input": [], "memory": []}
    for name, records in out.items():
        for i, c in enumerate(getattr(request, name)):
            content = content_from_proto(c)
            violations += content_violations(content, limits, f"{name}[{i}]")
            records.append(_record(c, keys, content))
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_CONTENT)
    return out["input"], out["memory"]


def _record(c: content_pb2.Content, keys: sel.SecretKeys, content: Any = None) -> sel.ContentRecord:
    """A request content as a record; its proto is reused as sent unless
    pruning changed it."""
    content = content if content is not None else content_from_proto(c)
    return sel.content_record(content, keys, lambda pruned: Rendered(c) if pruned is content else render(pruned))


_SECTIONS = ("instructions", "settings", "history", "memory", "input", "tools", "framing", "request")
_SCALARS = (
    "events_seen", "events_filtered", "events_selected", "units_selected", "units_dropped", "secrets_pruned",
    "bytes_per_token", "calibrated", "prefix_fingerprint", "selection_fingerprint", "envelope_fingerprint",
    "compaction_sequence", "last_sequence", "compressed",
)


def _accounting_to_proto(a: sel.Accounting) -> pb.ContextAccounting:
    fields: dict[str, Any] = {name: getattr(a, name) for name in _SCALARS}
    for name in _SECTIONS:
        section = getattr(a, name)
        fields[name] = pb.BudgetSection(bytes=section.bytes, tokens=section.tokens)
    return pb.ContextAccounting(**fields)
