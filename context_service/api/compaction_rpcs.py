"""CompactionRpcs: CompactSession (manual compaction).

Converts and validates; the compaction service does the rest. The call's
deadline bounds the summarizer, and cancelling the call cancels it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.errors import FieldViolation
from agentctx_common.protos import unknown_field_violations, value_violations
from agentctx_common.reasons import Reason
from context_service.domain.config import CompactionPolicy
from context_service.domain.limits import raise_if
from context_service.domain.names import parse_session_name
from context_service.domain.validation import compaction_violations
from context_service.mapping.convert import compaction_from_proto, event_to_proto

if TYPE_CHECKING:
    from context_service.app import ContextApp

MAX_INSTRUCTIONS_BYTES = 16 * 1024


class CompactionRpcs:
    app: ContextApp

    async def CompactSession(
        self, request: pb.CompactSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.CompactSessionResponse:
        caller = self.app.caller(context)
        key = parse_session_name(request.session, self.app.limits, "session")
        caller.require(key.app)
        violations = unknown_field_violations(request, "") + value_violations(request, "")
        if len(request.instructions.encode()) > MAX_INSTRUCTIONS_BYTES:
            violations.append(FieldViolation("instructions", f"must be at most {MAX_INSTRUCTIONS_BYTES} bytes"))
        override: CompactionPolicy | None = None
        if request.HasField("policy") and not violations:
            # `enabled` only gates automatic compaction; a manual call ignores it.
            override = compaction_from_proto(request.policy, enabled_set=False)
            violations += compaction_violations(override, "policy")
        raise_if(violations, Reason.INVALID_COMPACTION_REQUEST)
        outcome = await self.app.compaction.compact_now(
            key, instructions=request.instructions, override=override, remaining=context.time_remaining()
        )
        response = pb.CompactSessionResponse(
            compacted=outcome.compacted,
            kept_events=outcome.kept_events,
            kept_tokens=outcome.kept_tokens,
            kept_over_budget=outcome.kept_over_budget,
        )
        if outcome.event is not None:
            event_to_proto(outcome.event, key, response.compaction)
        return response
