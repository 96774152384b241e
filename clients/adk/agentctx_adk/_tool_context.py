"""AgentCtxToolPlugin: each ADK tool call of an agentctx session runs on
its own tool token, so what the tool reaches through ADK's ToolContext
(state, artifacts, memory) is what the session's config declares for that
tool (``ContextConfig.tools``), and nothing of another session or user.

ADK's Runner stores the model's function-call event (through
``AgentCtxSessionService``) before it runs the calls; before each call the
plugin mints the tokens of that event once (MintToolTokens: AgentCtxLlm's
turns store nothing themselves, so Generate returns none, and a token is
never carried in an event or its metadata) and gives the call's
ToolContext:

- artifact and memory services backed by ``agentctx_client.ToolContext``
  (the same ADK services as AgentCtxArtifactService and
  AgentCtxMemoryService, their calls made with the token: saves are
  staged until the function response, memory entries are the tool's);
- a state read through the token (ADK's view: session keys, ``user:`` and
  ``app:`` keys, plus the invocation's ``temp:`` keys); reading it without
  "state_read", or writing a stored key without "state_write", raises
  ``agentctx_client.PermissionDeniedError`` (TOOL_CAPABILITY_MISSING).

After the tool, the state keys it wrote are staged through the token too
(the function response event still records them, as ADK does). A refusal
(PermissionDeniedError or UnauthenticatedError of the token) answers the
call as an error result, ``{"error", "reason", "capability"...}``, so the
model sees it and the response still revokes the token; the writes the
token did not accept are left out of the event.

Tools of other sessions (an AgentTool's child, in ADK's memory) run as
before, with the invocation's own services.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Mapping
from typing import Any

import grpc
from google.adk.agents.context import Context
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions.state import State
from google.adk.tools.base_tool import BaseTool
from typing_extensions import override

import agentctx_client
from agentctx_adk import _convert
from agentctx_adk._artifact_service import AgentCtxArtifactService
from agentctx_adk._memory_service import AgentCtxMemoryService
from agentctx_adk._session_service import AgentCtxSessionService
from agentctx_client import Artifact, ErrorReason, MemoryAdded, MemoryMatch, ToolContext, ToolToken
from agentctx_client import ArtifactVersion as CtxVersion
from agentctx_client import MemoryEntry as CtxEntry

_REFUSED = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)


class AgentCtxToolPlugin(BasePlugin):
    """Runs every tool call of the sessions ``service`` stores on its tool
    token. Pass it to the Runner beside AgentCtxPlugin:
    ``Runner(..., plugins=[AgentCtxPlugin(service), AgentCtxToolPlugin(service)])``,
    and declare each tool's capabilities in the sessions' config
    (``AgentCtxSessionService(config=ContextConfig(tools=[...]))``): an
    undeclared tool gets "identity" only. ``cached_events`` bounds the
    events whose minted tokens wait for their calls."""

    def __init__(self, service: AgentCtxSessionService, name: str = "agentctx_tools", *,
                 cached_events: int = 256) -> None:
        super().__init__(name=name)
        self.service = service
        self._cached_events = cached_events
        self._minted: collections.OrderedDict[tuple[str, str], asyncio.Future[dict[str, ToolToken]]] = (
            collections.OrderedDict())
        self._calls: weakref.WeakKeyDictionary[Context, _Call] = weakref.WeakKeyDictionary()

    @override
    async def before_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                   tool_context: Context) -> dict[str, Any] | None:
        invocation = tool_context._invocation_context
        call_id = tool_context.function_call_id
        if invocation.session_service is not self.service or not call_id:
            return None  # not an agentctx session (an AgentTool's child session)
        session = tool_context.session
        name = self.service.session_name(session.app_name, session.user_id, session.id)
        event_id = next((e.id for e in reversed(session.events)
                         if any(c.id == call_id for c in e.get_function_calls())), None)
        if event_id is None:
            raise ValueError(f"no stored event of {session.id} holds the function call {call_id}")
        token = await self._token(name, event_id, call_id)
        context = self.service.client.tool_context(token)
        tokens = _TokenCalls(context)
        tool_context._invocation_context = invocation.model_copy(update={
            "artifact_service": AgentCtxArtifactService(self.service, calls=tokens),
            "memory_service": AgentCtxMemoryService(self.service, calls=tokens),
        })
        temp = {k: v for k, v in session.state.items() if k.startswith(State.TEMP_PREFIX)}
        value = temp
        if "state_read" in token.capabilities:
            seen = await context.state()
            value = {**_convert.merge_state(dict(seen.state), dict(seen.user_state), dict(seen.app_state)), **temp}
        tool_context._state = _TokenState(value, tool_context._event_actions.state_delta, token,
                                          tool_context._state._schema)
        self._calls[tool_context] = _Call(context, token)
        return None

    @override
    async def after_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Context,
                                  result: dict[str, Any]) -> dict[str, Any] | None:
        return await self._finish(tool_context)

    @override
    async def on_tool_error_callback(self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Context,
                                     error: Exception) -> dict[str, Any] | None:
        refused = await self._finish(tool_context)
        if isinstance(error, agentctx_client.AgentCtxError) and error.code in _REFUSED:
            return refusal(error)
        return refused

    async def _finish(self, tool_context: Context) -> dict[str, Any] | None:
        """Stages the state keys the tool wrote through its token; a
        refusal leaves them out of the response event and is the result."""
        call = self._calls.pop(tool_context, None)
        if call is None:
            return None
        delta = tool_context.actions.state_delta
        session, user, app = _convert.split_state(delta)
        if not (session or user or app):
            return None
        try:
            await call.context.update_state(session=session or None, user=user or None, app=app or None)
        except agentctx_client.AgentCtxError as err:
            if err.code not in _REFUSED:
                raise
            for key in [k for k in delta if not k.startswith(State.TEMP_PREFIX)]:
                del delta[key]
            return refusal(err)
        return None

    async def _token(self, session: str, event_id: str, call_id: str) -> ToolToken:
        """The call's token, from one MintToolTokens per event (the calls of
        an event run concurrently); a call seen again is minted again."""
        key = (session, event_id)
        minted = self._minted.get(key)
        if minted is None or (minted.done() and not minted.exception() and call_id not in minted.result()):
            minted = asyncio.get_running_loop().create_task(self._mint(session, event_id))
            self._minted[key] = minted
            while len(self._minted) > self._cached_events:
                self._minted.popitem(last=False)
        try:
            tokens = await minted
        except BaseException:
            self._minted.pop(key, None)
            raise
        token = tokens.pop(call_id, None)
        if not tokens:
            self._minted.pop(key, None)
        if token is None:
            raise ValueError(f"the context service minted no token for the function call {call_id} "
                             "(already answered?)")
        return token

    async def _mint(self, session: str, event_id: str) -> dict[str, ToolToken]:
        return {t.function_call_id: t for t in await self.service.client.mint_tool_tokens(session, event_id)}


def refusal(err: agentctx_client.AgentCtxError) -> dict[str, Any]:
    """A tool result for a refused token operation: the model sees what was
    missing (never the token)."""
    return {"error": err.message, "reason": err.reason_name, **err.metadata}


class _Call:
    def __init__(self, context: ToolContext, token: ToolToken) -> None:
        self.context = context
        self.token = token


def _denied(token: ToolToken, capability: str) -> agentctx_client.PermissionDeniedError:
    return agentctx_client.PermissionDeniedError(
        f"the tool's declaration does not grant {capability}", reason=ErrorReason.TOOL_CAPABILITY_MISSING,
        metadata={"capability": capability, "tool": token.tool})


class _TokenState(State):
    """ADK's State over the token's view: reads need "state_read", writes
    of stored (not ``temp:``) keys need "state_write"."""

    def __init__(self, value: dict[str, Any], delta: dict[str, Any], token: ToolToken, schema: Any) -> None:
        super().__init__(value, delta, schema)
        self._token = token

    def _check(self, key: object, capability: str) -> None:
        stored = not (isinstance(key, str) and key.startswith(State.TEMP_PREFIX))
        if stored and capability not in self._token.capabilities:
            raise _denied(self._token, capability)

    def __getitem__(self, key: str) -> Any:
        self._check(key, "state_read")
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._check(key, "state_read")
        return super().__contains__(key)

    def to_dict(self) -> dict[str, Any]:
        self._check(None, "state_read")
        return super().to_dict()

    def __setitem__(self, key: str, value: Any) -> None:
        self._check(key, "state_write")
        super().__setitem__(key, value)

    def update(self, delta: dict[str, Any]) -> None:
        for key in delta:
            self._check(key, "state_write")
        super().update(delta)


class _TokenCalls:
    """The artifact and memory calls AgentCtxArtifactService and
    AgentCtxMemoryService make, made with a tool token: the parent, app and
    user they name are the token's (the service checks the scope)."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    async def save_artifact(self, parent: str, artifact: str, content: str | bytes, *,
                            mime_type: str = "application/octet-stream",
                            custom_metadata: Mapping[str, Any] | None = None) -> CtxVersion:
        return await self.context.save_artifact(artifact, content, mime_type=mime_type,
                                                custom_metadata=custom_metadata)

    async def load_artifact(self, parent: str, artifact: str, *, version: int | None = None) -> Artifact:
        return await self.context.load_artifact(artifact, version=version)

    async def list_artifacts(self, parent: str) -> list[str]:
        return await self.context.list_artifacts()

    async def list_artifact_versions(self, parent: str, artifact: str) -> list[CtxVersion]:
        return await self.context.list_artifact_versions(artifact)

    async def delete_artifact(self, parent: str, artifact: str) -> int:
        return await self.context.delete_artifact(artifact)

    async def add_session_to_memory(self, session: str) -> MemoryAdded:
        raise ValueError("a tool token adds memory entries (add_memory), not whole sessions")

    async def add_memory(self, app: str, user: str, text: str, *, metadata: Mapping[str, str] | None = None,
                         author: str = "", memory_id: str = "") -> CtxEntry:
        # The entry is the tool's, with an id of the service's: the token
        # names its author and its source (the session and the call's event).
        return await self.context.add_memory(text, metadata=metadata)

    async def search_memory(self, app: str, user: str, query: str, *, limit: int = 0) -> list[MemoryMatch]:
        return await self.context.search_memory(query, limit=limit)

    async def delete_memory(self, name: str) -> None:
        await self.context.delete_memory(name)

