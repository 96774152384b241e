"""TurnRpcs: Generate and StreamGenerate, one agent turn each.

The servicer authorizes, validates and maps; ``context_service.turns``
runs the turn and ``context_service.domain.turn_rules`` holds its rules.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import tool_context_pb2
from agentctx_common.errors import FieldViolation, InvalidArgument, NotFound
from agentctx_common.protos import value_violations
from agentctx_common.reasons import Reason
from context_service.domain import turn_rules
from context_service.domain.event_validation import prepare_event
from context_service.domain.model import Event, SessionKey
from context_service.domain.names import parse_session_name
from context_service.domain.tool_tokens import response_ids
from context_service.mapping.build_context import accounting_to_proto
from context_service.mapping.convert import event_from_proto, event_to_proto
from context_service.mapping.tool_tokens import token_to_proto
from context_service.turns.types import Turn, TurnResult

if TYPE_CHECKING:
    from context_service.app import ContextApp


class TurnRpcs:
    app: ContextApp

    def _turn(self, request: pb.GenerateRequest, context: grpc.aio.ServicerContext[Any, Any], prefix: str) -> tuple[SessionKey, Turn]:
        """Authorized and validated; ``prefix`` names where the turn sits in
        the request, for field violations."""
        app = self.app
        caller = app.caller(context)
        key = parse_session_name(request.session, app.limits, f"{prefix}session")
        caller.require(key.app)
        # NONE: ADK's runner appends its own events; the turn stores nothing.
        store = request.storage != pb.TURN_STORAGE_NONE
        if len(request.input) > app.settings.max_turn_inputs:
            # Before anything is decoded: the turn's inputs are stored in one transaction.
            raise InvalidArgument.fields([FieldViolation(
                f"{prefix}input", f"has {len(request.input)} events; a turn takes at most "
                f"{app.settings.max_turn_inputs} (max_turn_inputs): append the earlier ones with AppendEvent",
            )], reason=Reason.INVALID_GENERATE_REQUEST)
        violations = [v for i, raw in enumerate(request.input) for v in value_violations(raw, f"{prefix}input[{i}]")]
        if violations:
            raise InvalidArgument.fields(violations, reason=Reason.INVALID_GENERATE_REQUEST)
        events = [event_from_proto(raw) for raw in request.input]
        violations = turn_rules.input_violations(
            events, [raw.ByteSize() for raw in request.input], app.limits,
            now=dt.datetime.now(dt.UTC), reply_id=request.reply_event_id,
            invocation_id=request.invocation_id, agent=request.agent, prefix=prefix, require_input=store,
        )
        if violations:
            raise InvalidArgument.fields(violations, reason=Reason.INVALID_GENERATE_REQUEST)
        inputs = tuple(prepare_event(e) for e in events)
        if store:
            ids = turn_rules.turn_ids(
                [e.id for e in inputs], invocation_id=request.invocation_id, reply_id=request.reply_event_id
            )
        else:
            ids = turn_rules.unstored_turn_ids(invocation_id=request.invocation_id, reply_id=request.reply_event_id)
        branch = inputs[-1].branch if inputs else ""
        return key, Turn(inputs, ids, request.agent, branch, app.mapper.generate_request(request, inputs, prefix), store)

    async def Generate(self, request: pb.GenerateRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.GenerateResponse:
        key, turn = self._turn(request, context, "")
        result = await self.app.turns.generate(key, turn, turn_rules.Deadline(context.time_remaining()))
        return await self._minted(_response(result, key, stored=turn.store), key, result, turn)

    async def StreamGenerate(
        self, request: pb.StreamGenerateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.StreamGenerateResponse]:
        key, turn = self._turn(request.turn, context, "turn.")
        async for item in self.app.turns.stream(key, turn, turn_rules.Deadline(context.time_remaining())):
            out = pb.StreamGenerateResponse()
            if isinstance(item, Event):
                event_to_proto(item, key, out.chunk)
            else:
                out.result.CopyFrom(await self._minted(_response(item, key, stored=turn.store), key, item, turn))
            yield out

    async def MintToolTokens(self, request: tool_context_pb2.MintToolTokensRequest,
                             context: grpc.aio.ServicerContext[Any, Any]) -> tool_context_pb2.MintToolTokensResponse:
        caller = self.app.caller(context)
        key = parse_session_name(request.session, self.app.limits, "session")
        caller.require(key.app)
        if not request.event_id:
            raise InvalidArgument.fields([FieldViolation("event_id", "the event holding the function calls is required")])
        record = await self.app.sessions.get_session(key)
        event = await self.app.sessions.get_event(key, request.event_id)
        if event is None:
            raise NotFound(f"event {request.event_id} not found in the session", reason=Reason.NOT_FOUND)
        later = await self.app.sessions.list_events(key, after_sequence=event.sequence, include_compactions=False)
        answered = frozenset(i for e in later if e.content is not None for i in response_ids(e.content.parts))
        out = tool_context_pb2.MintToolTokensResponse()
        tools = self.app.effective_config(record.config).tools
        for token in await self.app.tools.mint(key, event, tools, answered):
            token_to_proto(token, out.tokens.add())
        return out

    async def _minted(self, out: pb.GenerateResponse, key: SessionKey, result: TurnResult,
                      turn: Turn) -> pb.GenerateResponse:
        """``out`` with a tool token per function call of the stored reply:
        those stored with it, or, for a reply an earlier attempt stored
        (whose tokens went with that lost response), fresh ones."""
        tokens = list(result.tokens)
        reply = result.reply
        has_calls = reply.content is not None and any(p.function_call for p in reply.content.parts)
        if turn.store and result.deduplicated and has_calls:
            tools = self.app.effective_config((await self.app.sessions.get_session(key)).config).tools
            tokens = await self.app.tools.mint(key, reply, tools)
        for token in tokens:
            token_to_proto(token, out.tool_tokens.add())
        return out


def _response(result: TurnResult, key: SessionKey, *, stored: bool) -> pb.GenerateResponse:
    out = pb.GenerateResponse(
        background_compaction_scheduled=result.background_scheduled, deduplicated=result.deduplicated
    )
    event_to_proto(result.reply, key, out.reply)
    if not stored:
        out.reply.ClearField("name")  # no stored event to name
    if result.accounting is not None:
        out.accounting.CopyFrom(accounting_to_proto(result.accounting))
    for event in result.compactions:
        event_to_proto(event, key, out.compactions.add())
    return out
