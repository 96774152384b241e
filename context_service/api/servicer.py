"""The ContextService servicer, composed of one mixin per area so that each
area's RPCs live in a file of their own."""

from __future__ import annotations

from agentctx.context.v1 import context_service_pb2_grpc
from context_service.api.compaction_rpcs import CompactionRpcs
from context_service.api.diagnostics_rpcs import DiagnosticsRpcs
from context_service.api.selection_rpcs import SelectionRpcs
from context_service.api.session_rpcs import SessionRpcs
from context_service.api.turn_rpcs import TurnRpcs
from context_service.app import ContextApp


class ContextServicer(
    SessionRpcs,
    SelectionRpcs,
    CompactionRpcs,
    TurnRpcs,
    DiagnosticsRpcs,
    context_service_pb2_grpc.ContextServiceServicer,
):
    def __init__(self, app: ContextApp) -> None:
        self.app = app
