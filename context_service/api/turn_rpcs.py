"""TurnRpcs: Generate and StreamGenerate, one agent turn each.

The servicer authorizes, validates and converts; ``context_service.turns``
runs the turn and ``context_service.domain.turns`` holds its rules.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.errors import InvalidArgument
from agentctx_common.protos import value_violations
from agentctx_common.reasons import Reason
from context_service.api.convert import content_to_proto, event_from_proto, event_to_proto
from context_service.domain import turns
from context_service.domain.model import Event, SessionKey
from context_service.domain.sessions import parse_session_name, prepare_event
from context_service.turns.runner import Turn, TurnResult, TurnRunner

if TYPE_CHECKING:
    from context_service.app import ContextApp

# GenerateRequest fields BuildContext takes as they are.
_BUILD_MESSAGES = ("system_instruction", "tool_config", "generation_config", "policy")


class TurnRpcs:
    app: ContextApp

    @functools.cached_property
    def turns(self) -> TurnRunner:
        return TurnRunner(self.app)

    def _turn(self, request: pb.GenerateRequest, context: grpc.aio.ServicerContext, prefix: str) -> tuple[SessionKey, Turn]:
        """Authorized and validated; ``prefix`` names where the turn sits in
        the request, for field violations."""
        app = self.app
        caller = app.caller(context)
        key = parse_session_name(request.session, app.limits, f"{prefix}session")
        caller.require(key.app)
        violations = [v for i, raw in enumerate(request.input) for v in value_violations(raw, f"{prefix}input[{i}]")]
        if violations:
            raise InvalidArgument.fields(violations, reason=Reason.INVALID_GENERATE_REQUEST)
        events = [event_from_proto(raw) for raw in request.input]
        violations = turns.input_violations(
            events, [raw.ByteSize() for raw in request.input], app.limits,
            now=dt.datetime.now(dt.UTC), reply_id=request.reply_event_id,
            invocation_id=request.invocation_id, agent=request.agent, prefix=prefix,
        )
        if violations:
            raise InvalidArgument.fields(violations, reason=Reason.INVALID_GENERATE_REQUEST)
        inputs = tuple(prepare_event(e) for e in events)
        ids = turns.turn_ids(
            [e.id for e in inputs], invocation_id=request.invocation_id, reply_id=request.reply_event_id
        )
        return key, Turn(inputs, ids, request.agent, inputs[-1].branch, _build_request(request, inputs))

    async def Generate(self, request: pb.GenerateRequest, context: grpc.aio.ServicerContext) -> pb.GenerateResponse:
        key, turn = self._turn(request, context, "")
        result = await self.turns.generate(key, turn, turns.Deadline(context.time_remaining()))
        return _response(result, key)

    async def StreamGenerate(
        self, request: pb.StreamGenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamGenerateResponse]:
        key, turn = self._turn(request.turn, context, "turn.")
        async for item in self.turns.stream(key, turn, turns.Deadline(context.time_remaining())):
            out = pb.StreamGenerateResponse()
            if isinstance(item, Event):
                event_to_proto(item, key, out.chunk)
            else:
                out.result.CopyFrom(_response(item, key))
            yield out


def _build_request(request: pb.GenerateRequest, inputs: tuple[Event, ...]) -> pb.BuildContextRequest:
    build = pb.BuildContextRequest(
        session=request.session, tools=request.tools, memory=request.memory, model=request.model,
        input=[content_to_proto(e.content) for e in inputs if e.content is not None],
    )
    for name in _BUILD_MESSAGES:
        if request.HasField(name):
            getattr(build, name).CopyFrom(getattr(request, name))
    return build


def _response(result: TurnResult, key: SessionKey) -> pb.GenerateResponse:
    out = pb.GenerateResponse(
        background_compaction_scheduled=result.background_scheduled, deduplicated=result.deduplicated
    )
    event_to_proto(result.reply, key, out.reply)
    if result.accounting is not None:
        out.accounting.CopyFrom(result.accounting)
    for event in result.compactions:
        event_to_proto(event, key, out.compactions.add())
    return out
