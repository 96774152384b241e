"""ToolContextServicer: the context one tool call may touch, with its tool
token (metadata "agentctx-tool-token") as the only credential.

Each RPC first turns the token into a grant for the capability it needs
(ToolContexts.grant: signature, deadline, capability, revocation; no app
grant is consulted), then acts on the token's own app, user and session
only: no request names them. Saves and state writes are staged against the
call (collected with its function response, see storage.tool_calls); the
artifact code is the ArtifactService's own (save_stream, load_stream).
Spans and metrics carry counts and sizes; the token never leaves this
module but as its claims.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import empty_pb2, timestamp_pb2

from agentctx.context.v1 import artifacts_pb2, tool_context_pb2, tool_context_pb2_grpc
from agentctx.memory.v1 import memory_service_pb2
from agentctx_common.errors import AgentCtxError, FieldViolation, InvalidArgument, PermissionDenied
from agentctx_common.reasons import Reason
from context_service.api.artifact_rpcs import drain, load_stream, save_stream
from context_service.api.session_rpcs import delta_from_proto
from context_service.domain.artifacts import ArtifactScope, ArtifactVersionRecord, check_version, scope_of
from context_service.domain.limits import raise_if
from context_service.domain.memory import MemoryKey, NewMemory, check_new_memory, search_query
from context_service.domain.names import new_id, parse_memory_name
from context_service.domain.parts import data_part, to_json
from context_service.domain.session_records import SessionRecord
from context_service.domain.tool_tokens import TOKEN_METADATA_KEY, Staged, ToolClaims, merge_delta
from context_service.mapping.artifacts import version_to_proto
from context_service.mapping.convert import dict_to_struct
from context_service.mapping.memory import entry_to_proto, search_response
from context_service.tools.service import ToolGrant

if TYPE_CHECKING:
    from context_service.app import ContextApp

Context = grpc.aio.ServicerContext[Any, Any]


def presented_token(context: Context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == TOKEN_METADATA_KEY:
            return value if isinstance(value, str) else value.decode("latin-1")
    return None


def _timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    # The mint's own conversion: int(seconds * 1e9) can land a microsecond short.
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(dt.datetime.fromtimestamp(seconds, dt.UTC))
    return out


class ToolContextServicer(tool_context_pb2_grpc.ToolContextServiceServicer):
    def __init__(self, app: ContextApp) -> None:
        self.app = app

    async def _grant(self, context: Context, capability: str) -> ToolGrant:
        return await self.app.tools.grant(presented_token(context), capability)

    # --- identity and state -----------------------------------------------------------

    async def GetToolIdentity(self, request: tool_context_pb2.GetToolIdentityRequest,
                              context: Context) -> tool_context_pb2.ToolIdentity:
        c = (await self._grant(context, "identity")).claims
        return tool_context_pb2.ToolIdentity(
            app=c.app, user=c.user, session=f"apps/{c.app}/users/{c.user}/sessions/{c.session}",
            event_id=c.event_id, function_call_id=c.call_id, tool=c.tool, capabilities=c.capability_names,
            expire_time=_timestamp(c.expires_at),
        )

    async def GetToolState(self, request: tool_context_pb2.GetToolStateRequest,
                           context: Context) -> tool_context_pb2.ToolState:
        grant, record = await self.app.tools.read(presented_token(context), "state_read", self._session)
        return _state(record, grant.staged)

    async def _session(self, claims: ToolClaims) -> SessionRecord:
        return await self.app.sessions.get_session(claims.session_key)

    async def UpdateToolState(self, request: tool_context_pb2.UpdateToolStateRequest,
                              context: Context) -> tool_context_pb2.ToolState:
        grant = await self._grant(context, "state_write")
        delta = delta_from_proto(request.state_delta, self.app.limits)

        def change(staged: Staged) -> None:
            staged.delta = merge_delta(staged.delta, delta)

        staged = await self.app.tools.stage(grant, change)
        return _state(await self._session(grant.claims), staged)

    # --- artifacts ----------------------------------------------------------------------

    async def SaveToolArtifact(self, request_iterator: AsyncIterable[tool_context_pb2.SaveToolArtifactRequest],
                               context: Context) -> artifacts_pb2.SaveArtifactResponse:
        requests = aiter(request_iterator)
        try:
            grant = await self._grant(context, "artifact_put")
            first = await anext(requests, None)
            if first is None or first.WhichOneof("payload") != "header":
                raise InvalidArgument.fields([FieldViolation("header", "the first message must carry the header")])
            header = first.header
            scope = _scope(grant.claims, header.artifact, "header.artifact")
            record = await save_stream(self.app, scope, header.artifact, header.part, header.custom_metadata,
                                       requests, staged_call=grant.claims.token_id)
        except AgentCtxError:
            # What the tool still sends is read first, or its client sees INTERNAL (grpc/grpc#36066).
            await drain(requests, self.app.settings.max_artifact_bytes)
            raise
        return artifacts_pb2.SaveArtifactResponse(artifact=version_to_proto(record))

    async def _version(self, claims: ToolClaims, artifact: str, request: Any) -> ArtifactVersionRecord:
        version = request.version if request.HasField("version") else None
        check_version(version)
        return await self.app.artifacts.get_version(_scope(claims, artifact), artifact, version, call=claims.token_id)

    async def LoadToolArtifact(self, request: tool_context_pb2.LoadToolArtifactRequest,
                               context: Context) -> AsyncIterator[artifacts_pb2.LoadArtifactResponse]:
        _, record = await self.app.tools.read(presented_token(context), "artifact_get",
                                              lambda c: self._version(c, request.artifact, request))
        async for message in load_stream(self.app, record):
            yield message

    async def ListToolArtifactNames(self, request: tool_context_pb2.ListToolArtifactNamesRequest,
                                    context: Context) -> artifacts_pb2.ListArtifactNamesResponse:
        _, names = await self.app.tools.read(
            presented_token(context), "artifact_list",
            lambda c: self.app.artifacts.list_names(c.app, c.user, c.session, call=c.token_id))
        return artifacts_pb2.ListArtifactNamesResponse(artifacts=names)

    async def ListToolArtifactVersions(self, request: tool_context_pb2.ListToolArtifactVersionsRequest,
                                       context: Context) -> artifacts_pb2.ListArtifactVersionsResponse:
        _, versions = await self.app.tools.read(
            presented_token(context), "artifact_list_versions",
            lambda c: self.app.artifacts.list_versions(_scope(c, request.artifact), request.artifact,
                                                       call=c.token_id))
        return artifacts_pb2.ListArtifactVersionsResponse(versions=[version_to_proto(v) for v in versions])

    async def DeleteToolArtifact(self, request: tool_context_pb2.DeleteToolArtifactRequest,
                                 context: Context) -> artifacts_pb2.DeleteArtifactResponse:
        grant = await self._grant(context, "artifact_delete")
        version = request.version if request.HasField("version") else None
        check_version(version)
        deleted = await self.app.artifacts.delete(_scope(grant.claims, request.artifact), request.artifact, version,
                                                  call=grant.claims.token_id)
        return artifacts_pb2.DeleteArtifactResponse(deleted_versions=deleted)

    async def AttachToolArtifact(self, request: tool_context_pb2.AttachToolArtifactRequest,
                                 context: Context) -> artifacts_pb2.ArtifactVersion:
        grant = await self._grant(context, "artifact_attach")
        record = await self._version(grant.claims, request.artifact, request)
        # The part joins the response event: bounded like any event's content.
        limit = self.app.settings.max_event_bytes // 2
        raise_if([FieldViolation("artifact", f"an attached artifact is at most {limit} bytes")]
                 if record.size_bytes > limit else [], Reason.INVALID_CONTENT)
        data = b"".join([chunk async for chunk in self.app.artifacts.read_chunks(record)])
        encoded = to_json(data_part(record.text, record.mime_type, data))

        def change(staged: Staged) -> None:
            staged.attachments.append(encoded)

        await self.app.tools.stage(grant, change)
        return version_to_proto(record)

    # --- memory ---------------------------------------------------------------------------

    async def SearchToolMemory(self, request: tool_context_pb2.SearchToolMemoryRequest,
                               context: Context) -> memory_service_pb2.SearchMemoryResponse:
        _, matches = await self.app.tools.read(
            presented_token(context), "memory_search",
            lambda c: self.app.memory.search(
                search_query(c.app, c.user, request.query, dict(request.metadata_filter), request.limit)))
        return search_response(matches)

    async def AddToolMemory(self, request: tool_context_pb2.AddToolMemoryRequest,
                            context: Context) -> memory_service_pb2.MemoryEntry:
        c = (await self._grant(context, "memory_add")).claims
        entry = NewMemory(key=MemoryKey(c.app, c.user, new_id()), text=request.text, metadata=dict(request.metadata),
                          session_id=c.session, event_id=c.event_id, author=c.tool)
        check_new_memory(entry, self.app.limits)
        return entry_to_proto(await self.app.memory.add(entry))

    async def DeleteToolMemory(self, request: tool_context_pb2.DeleteToolMemoryRequest,
                               context: Context) -> empty_pb2.Empty:
        c = (await self._grant(context, "memory_delete")).claims
        key = parse_memory_name(request.name, self.app.limits)
        if (key.app, key.user) != (c.app, c.user):
            raise PermissionDenied("the memory entry belongs to another user or app",
                                   reason=Reason.TOOL_SCOPE_MISMATCH)
        await self.app.memory.delete(key)
        return empty_pb2.Empty()



def _scope(claims: ToolClaims, artifact: str, path: str = "artifact") -> ArtifactScope:
    return scope_of(claims.app, claims.user, claims.session, artifact, "token", path)


def _state(record: SessionRecord, staged: Staged) -> tool_context_pb2.ToolState:
    delta = staged.delta
    out = tool_context_pb2.ToolState()
    dict_to_struct({**record.state, **delta.session}, out.state)
    dict_to_struct({**record.user_state, **delta.user}, out.user_state)
    dict_to_struct({**record.app_state, **delta.app}, out.app_state)
    return out
