"""MemoryServicer: the context service's MemoryService.

Each RPC authenticates the caller, parses the resource name, checks the
caller may use the app (another app's entries are PERMISSION_DENIED before
anything is looked up), validates (domain.memory) and calls the memory
application service. Mapping is in mapping.memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import empty_pb2

from agentctx.memory.v1 import memory_service_pb2 as pb
from agentctx.memory.v1 import memory_service_pb2_grpc
from agentctx_common.errors import FieldViolation
from agentctx_common.reasons import Reason
from context_service.domain.limits import raise_if
from context_service.domain.memory import MemoryKey, check_memory_id, check_new_memory, search_query
from context_service.domain.names import new_id, parse_memory_name, parse_session_name, parse_user_parent
from context_service.mapping.memory import entry_to_proto, new_memory, search_response

if TYPE_CHECKING:
    from context_service.app import ContextApp


class MemoryServicer(memory_service_pb2_grpc.MemoryServiceServicer):
    def __init__(self, app: ContextApp) -> None:
        self.app = app

    async def AddSessionToMemory(self, request: pb.AddSessionToMemoryRequest,
                                 context: grpc.aio.ServicerContext[Any, Any]) -> pb.AddSessionToMemoryResponse:
        caller = self.app.caller(context)
        key = parse_session_name(request.session, self.app.limits, "session")
        caller.require(key.app)
        result = await self.app.memory.add_session(key, context.time_remaining())
        return pb.AddSessionToMemoryResponse(added_count=result.added, existing_count=result.existing)

    async def AddMemory(self, request: pb.AddMemoryRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.MemoryEntry:
        caller = self.app.caller(context)
        limits = self.app.limits
        app, user = parse_user_parent(request.parent, limits, "parent")
        caller.require(app)
        if request.memory_id:
            check_memory_id(request.memory_id, limits)
        session_id = ""
        if request.memory.session:
            source = parse_session_name(request.memory.session, limits, "memory.session")
            raise_if([FieldViolation("memory.session", "must be a session of the parent's app and user")]
                     if (source.app, source.user) != (app, user) else [], Reason.INVALID_MEMORY_REQUEST)
            session_id = source.session
        entry = new_memory(MemoryKey(app, user, request.memory_id or new_id()), request.memory, session_id)
        check_new_memory(entry, limits)
        return entry_to_proto(await self.app.memory.add(entry, context.time_remaining()))

    async def SearchMemory(self, request: pb.SearchMemoryRequest,
                           context: grpc.aio.ServicerContext[Any, Any]) -> pb.SearchMemoryResponse:
        caller = self.app.caller(context)
        app, user = parse_user_parent(request.parent, self.app.limits, "parent")
        caller.require(app)
        query = search_query(app, user, request.query, dict(request.metadata_filter), request.limit)
        return search_response(await self.app.memory.search(query, context.time_remaining()))

    async def DeleteMemory(self, request: pb.DeleteMemoryRequest,
                           context: grpc.aio.ServicerContext[Any, Any]) -> empty_pb2.Empty:
        caller = self.app.caller(context)
        key = parse_memory_name(request.name, self.app.limits)
        caller.require(key.app)
        await self.app.memory.delete(key)
        return empty_pb2.Empty()
