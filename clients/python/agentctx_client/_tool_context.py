"""ToolContext: what one tool call may touch, with its tool token as the
only credential (ToolContextService).

The agent gets a token per function call (``GenerateResult.tool_tokens``,
``ContextClient.mint_tool_tokens``) and hands it to the tool that runs the
call, in its own process or anywhere else. The tool needs nothing more: no
session name, no app grant; its connection is TLS (with a client
certificate where the server requires one, which need not grant any app).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc

from agentctx.context.v1 import session_pb2, tool_context_pb2, tool_context_pb2_grpc
from agentctx_client._artifacts import (
    CHUNK_BYTES,
    DEFAULT_MIME_TYPE,
    Artifact,
    ArtifactContent,
    ArtifactVersion,
    content_pieces,
    open_stream,
    read_whole,
    save_stream,
)
from agentctx_client._config import RetryPolicy, TlsConfig, open_channel
from agentctx_client._retry import Calls, Deadline, Retrier
from agentctx_client._types import JSON, MemoryEntry, MemoryMatch, ToolIdentity, ToolState, ToolToken, _struct

#: The request metadata key that carries a tool token.
TOOL_TOKEN_METADATA_KEY = "agentctx-tool-token"


class ToolContext(Calls):
    """The context of one tool call, opened by its token.

    Build it from the token and a channel to the context service (``stub``
    is the raw ToolContextServiceStub), or with ``ToolContext.connect``::

        async with ToolContext.connect(token, "ctx.example:50051", tls=TlsConfig(ca="ca.pem")) as tool:
            city = (await tool.state()).state.get("city")
            await tool.save_artifact("report.txt", f"weather for {city}")
            await tool.update_state(session={"reported": True})

    What the call may do is what the session's config declares for its
    tool (``identity()`` lists it). State updates, saved artifact versions
    and attachments are staged against the call: the tool sees them at
    once, everyone else when the agent appends the call's function
    response (then the token is revoked); they are dropped when no response
    comes before the token's deadline. Artifact deletes and memory changes
    take effect at once.

    Failures raise the client's exceptions: PermissionDeniedError with
    reason TOOL_CAPABILITY_MISSING (``err.metadata["capability"]``),
    TOOL_TOKEN_EXPIRED, TOOL_TOKEN_REVOKED or TOOL_SCOPE_MISMATCH;
    UnauthenticatedError with TOOL_TOKEN_MISSING or TOOL_TOKEN_INVALID.
    Reads are retried like ContextClient's; writes are not. The token
    never appears in this object's repr.
    """

    def __init__(self, token: str | ToolToken, channel: grpc.aio.Channel, *, timeout: float | None = 30.0,
                 retry: RetryPolicy = RetryPolicy(), metadata: Sequence[tuple[str, str]] = (),
                 owns_channel: bool = False) -> None:
        value = token.token if isinstance(token, ToolToken) else token
        if not value:
            raise ValueError("ToolContext needs a tool token")
        self.channel = channel
        self.stub = tool_context_pb2_grpc.ToolContextServiceStub(channel)
        self.timeout = timeout
        self.retry = retry
        self.metadata = (*(m for m in metadata if m[0] != TOOL_TOKEN_METADATA_KEY), (TOOL_TOKEN_METADATA_KEY, value))
        self._retrier = Retrier(retry)
        self._owns_channel = owns_channel

    @classmethod
    def connect(cls, token: str | ToolToken, target: str, *, tls: TlsConfig | None = None,
                insecure_loopback: bool = False, timeout: float | None = 30.0, retry: RetryPolicy = RetryPolicy(),
                options: Sequence[tuple[str, Any]] = ()) -> ToolContext:
        """A ToolContext on its own channel to ``target`` (closed by
        ``close()``): TLS as ``connect()`` takes it (``tls`` may omit the
        client certificate when the server does not require one)."""
        channel = open_channel(target, tls=tls, insecure_loopback=insecure_loopback, options=options)
        return cls(token, channel, timeout=timeout, retry=retry, owns_channel=True)

    def __repr__(self) -> str:
        return f"ToolContext(channel={self.channel!r})"

    async def __aenter__(self) -> ToolContext:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel when this object opened it (``connect``)."""
        if self._owns_channel:
            await self.channel.close()

    # --- identity and state

    async def identity(self, *, timeout: float | None = None) -> ToolIdentity:
        """The token's app, user, session, event, function call, tool,
        capabilities and deadline."""
        return ToolIdentity.from_proto(
            await self._call(self.stub.GetToolIdentity, tool_context_pb2.GetToolIdentityRequest(), timeout))

    async def state(self, *, timeout: float | None = None) -> ToolState:
        """The session's, the user's and the app's state, this call's staged
        writes included (capability "state_read")."""
        return ToolState.from_proto(
            await self._call(self.stub.GetToolState, tool_context_pb2.GetToolStateRequest(), timeout))

    async def update_state(self, *, session: JSON | None = None, user: JSON | None = None, app: JSON | None = None,
                           timeout: float | None = None) -> ToolState:
        """Stages keys of the session's, the user's and the app's state
        (later writes of a key win), applied with the function response;
        returns the state as the call now sees it (capability
        "state_write")."""
        delta = session_pb2.StateDelta(session=_struct(session), user=_struct(user), app=_struct(app))
        request = tool_context_pb2.UpdateToolStateRequest(state_delta=delta)
        return ToolState.from_proto(await self._call(self.stub.UpdateToolState, request, timeout, retry=False))

    # --- artifacts

    async def save_artifact(self, artifact: str, content: ArtifactContent, *, mime_type: str = DEFAULT_MIME_TYPE,
                            custom_metadata: JSON | None = None, chunk_bytes: int = CHUNK_BYTES,
                            timeout: float | None = None) -> ArtifactVersion:
        """Saves the next version of an artifact of the session ("user:"
        ids: of its user), staged until the function response; ``content``
        as ``ContextClient.save_artifact`` takes it (capability
        "artifact_put"). Not retried."""
        header = tool_context_pb2.SaveToolArtifactHeader(artifact=artifact, custom_metadata=_struct(custom_metadata))
        pieces = content_pieces(header.part, content, mime_type, chunk_bytes)
        return await save_stream(self.stub.SaveToolArtifact, tool_context_pb2.SaveToolArtifactRequest, header,
                                 pieces, Deadline(self.timeout if timeout is None else timeout), self.metadata)

    async def open_artifact(self, artifact: str, *, version: int | None = None,
                            timeout: float | None = None) -> tuple[ArtifactVersion, AsyncIterator[bytes]]:
        """A version (the latest when ``version`` is None) and an iterator
        of its content's chunks (capability "artifact_get")."""
        deadline = Deadline(self.timeout if timeout is None else timeout)
        request = tool_context_pb2.LoadToolArtifactRequest(artifact=artifact, version=version)
        return await open_stream(self.stub.LoadToolArtifact(request, timeout=deadline.remaining(),
                                                            metadata=self.metadata))

    async def load_artifact(self, artifact: str, *, version: int | None = None,
                            timeout: float | None = None) -> Artifact:
        """A version (the latest when ``version`` is None), whole, this
        call's staged saves included (capability "artifact_get")."""
        return await read_whole(self.open_artifact(artifact, version=version, timeout=timeout))

    async def list_artifacts(self, *, timeout: float | None = None) -> list[str]:
        """The artifact ids of the session and its user (capability
        "artifact_list")."""
        response = await self._call(self.stub.ListToolArtifactNames,
                                    tool_context_pb2.ListToolArtifactNamesRequest(), timeout)
        return list(response.artifacts)

    async def list_artifact_versions(self, artifact: str, *, timeout: float | None = None) -> list[ArtifactVersion]:
        """Every version of an artifact, oldest first (capability
        "artifact_list_versions")."""
        response = await self._call(self.stub.ListToolArtifactVersions,
                                    tool_context_pb2.ListToolArtifactVersionsRequest(artifact=artifact), timeout)
        return [ArtifactVersion.from_proto(v) for v in response.versions]

    async def delete_artifact(self, artifact: str, *, version: int | None = None,
                              timeout: float | None = None) -> int:
        """Deletes one version, or every one (``version`` None), at once;
        returns how many (capability "artifact_delete")."""
        request = tool_context_pb2.DeleteToolArtifactRequest(artifact=artifact, version=version)
        response = await self._call(self.stub.DeleteToolArtifact, request, timeout, retry=False)
        return int(response.deleted_versions)

    async def attach_artifact(self, artifact: str, *, version: int | None = None,
                              timeout: float | None = None) -> ArtifactVersion:
        """Attaches a version (the latest when None) to the function
        response: its content is appended to the response event's parts
        (capability "artifact_attach"). Not retried."""
        request = tool_context_pb2.AttachToolArtifactRequest(artifact=artifact, version=version)
        return ArtifactVersion.from_proto(
            await self._call(self.stub.AttachToolArtifact, request, timeout, retry=False))

    # --- memory

    async def search_memory(self, query: str, *, metadata_filter: Mapping[str, str] | None = None, limit: int = 0,
                            timeout: float | None = None) -> list[MemoryMatch]:
        """The user's memory entries matching any word of ``query``, best
        first (capability "memory_search")."""
        request = tool_context_pb2.SearchToolMemoryRequest(query=query, metadata_filter=dict(metadata_filter or {}),
                                                           limit=limit)
        response = await self._call(self.stub.SearchToolMemory, request, timeout)
        return [MemoryMatch.from_proto(m) for m in response.matches]

    async def add_memory(self, text: str, *, metadata: Mapping[str, str] | None = None,
                         timeout: float | None = None) -> MemoryEntry:
        """Adds an entry to the user's memory, sourced from the session and
        the call's event, authored by the tool (capability "memory_add").
        Not retried."""
        request = tool_context_pb2.AddToolMemoryRequest(text=text, metadata=dict(metadata or {}))
        return MemoryEntry.from_proto(await self._call(self.stub.AddToolMemory, request, timeout, retry=False))

    async def delete_memory(self, name: str, *, timeout: float | None = None) -> None:
        """Deletes an entry of the user's memory by ``MemoryEntry.name``
        (capability "memory_delete"). Not retried."""
        await self._call(self.stub.DeleteToolMemory, tool_context_pb2.DeleteToolMemoryRequest(name=name), timeout,
                         retry=False)
