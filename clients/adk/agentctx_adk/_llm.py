"""AgentCtxLlm: an ADK model whose calls the agentctx context service makes.

ADK's Runner appends every event (the user message, the model's replies,
the tool results) through ``AgentCtxSessionService``, so each model call is
a Generate with ``storage=TURN_STORAGE_NONE``: the context service builds
the request from the session's stored events, sends it through the cache
tier under a lease, and returns the reply without storing it (the Runner
stores it next). The provider key stays with the cache service; this
process only holds the agentctx client's mTLS identity.

ADK does not tell a model which session it serves, so ``AgentCtxPlugin``
(a Runner plugin) records the session in the request before each model
call. ``llm_request.contents`` is ADK's own view of the same events and is
not sent: the context service's selection, pruning and compaction decide
what the model sees.

Two kinds of call have no agentctx session behind them, and send their
own contents instead, in the app's and user's scratch session (which
stores nothing, so the contents are the whole history): an agent run by
an ``AgentTool``, whose Runner keeps its child session in memory, and
ADK's own compaction summarizer, which calls the model outside any
plugin callback (the plugin leaves the invocation's scratch session in a
context variable for it).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types
from pydantic import PrivateAttr
from typing_extensions import override

import agentctx_client
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, content_pb2, event_pb2, generation_pb2
from agentctx_adk import _convert
from agentctx_adk._session_service import AgentCtxSessionService

log = logging.getLogger("agentctx_adk")

# Where AgentCtxPlugin leaves the agentctx session name for the model (a
# request label, so that it travels with the request object itself).
SESSION_LABEL = "agentctx_session"
_AGENT_LABEL = "adk_agent_name"
# Set (to "1") when the call sends llm_request.contents in a scratch session.
CONTENTS_LABEL = "agentctx_contents"
# The scratch session of the invocation running, for calls no plugin
# callback sees (ADK's compaction summarizer).
_SCRATCH: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentctx_scratch", default=None)
# LlmResponse.custom_metadata key of the call's public cache record.
CACHE_METADATA_KEY = "agentctx_cache"

_MODES = {
    types.FunctionCallingConfigMode.AUTO: generation_pb2.FUNCTION_CALLING_MODE_AUTO,
    types.FunctionCallingConfigMode.ANY: generation_pb2.FUNCTION_CALLING_MODE_ANY,
    types.FunctionCallingConfigMode.NONE: generation_pb2.FUNCTION_CALLING_MODE_NONE,
}


class AgentCtxPlugin(BasePlugin):
    """Records, before each model call, the agentctx session the ADK
    invocation runs in (named as ``service`` names it), for AgentCtxLlm.
    Pass it to the Runner: ``Runner(..., plugins=[AgentCtxPlugin(service)])``."""

    def __init__(self, service: AgentCtxSessionService, name: str = "agentctx") -> None:
        super().__init__(name=name)
        self.service = service

    @override
    async def before_run_callback(self, *, invocation_context: InvocationContext) -> types.Content | None:
        if invocation_context.session_service is self.service:
            session = invocation_context.session
            _SCRATCH.set(await self.service.scratch_session(session.app_name, session.user_id))
        return None

    @override
    async def before_model_callback(self, *, callback_context: CallbackContext,
                                    llm_request: LlmRequest) -> LlmResponse | None:
        session = callback_context.session
        llm_request.config = llm_request.config or types.GenerateContentConfig()
        labels = dict(llm_request.config.labels or {})
        # ADK gives a plugin no public view of the invocation's session service.
        if callback_context._invocation_context.session_service is self.service:
            labels[SESSION_LABEL] = self.service.session_name(session.app_name, session.user_id, session.id)
        else:  # an AgentTool's child session, kept in ADK's memory
            labels[SESSION_LABEL] = await self.service.scratch_session(session.app_name, session.user_id)
            labels[CONTENTS_LABEL] = "1"
        llm_request.config.labels = labels
        return None


class AgentCtxLlm(BaseLlm):
    """An ADK model served by the agentctx context service. ``model`` is
    the agentctx model name (empty: the session's model); ``client`` an
    ``agentctx_client.ContextClient``, usually the session service's."""

    model: str = ""
    _client: Callable[[], agentctx_client.ContextClient] = PrivateAttr()
    _timeout: float | None = PrivateAttr(default=None)

    def __init__(self, client: agentctx_client.ContextClient | Callable[[], agentctx_client.ContextClient], *,
                 model: str = "", timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)
        self._client = (lambda: client) if isinstance(client, agentctx_client.ContextClient) else client
        self._timeout = timeout

    @classmethod
    def for_sessions(cls, service: AgentCtxSessionService, **kwargs: Any) -> AgentCtxLlm:
        """A model over the same client (and context service) as
        ``service``, taken when the model is first called."""
        return cls(lambda: service.client, **kwargs)

    @override
    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        # One complete response even when ADK streams: the reply is only
        # whole once the context service has it, and the Runner stores that.
        request = generate_request(llm_request, self.model)
        client = self._client()
        response = await client._call(client.stub.Generate, request, self._timeout)
        yield llm_response(response)


# --- mapping (pure, tested through the ADK tests) ------------------------------


def generate_request(llm_request: LlmRequest, default_model: str = "") -> pb.GenerateRequest:
    config = llm_request.config or types.GenerateContentConfig()
    labels = config.labels or {}
    session = labels.get(SESSION_LABEL)
    contents = bool(labels.get(CONTENTS_LABEL))
    if not session:
        session, contents = _SCRATCH.get(), True
    if not session:
        raise ValueError("AgentCtxLlm needs the session: add AgentCtxPlugin(session_service) to the Runner's "
                         "plugins, and call the model from inside a Runner invocation on that session service")
    out = pb.GenerateRequest(
        session=session, storage=pb.TURN_STORAGE_NONE, model=llm_request.model or default_model,
        agent=labels.get(_AGENT_LABEL, ""),
    )
    if contents:
        out.input.extend(_input_events(llm_request.contents))
    instruction = _instruction(config.system_instruction)
    if instruction is not None:
        out.system_instruction.CopyFrom(instruction)
    for tool in config.tools or ():
        declarations = getattr(tool, "function_declarations", None)
        if not declarations:
            raise ValueError(f"AgentCtxLlm sends function tools only, not {type(tool).__name__}")
        out.tools.add().function_declarations.extend(_declaration(d) for d in declarations)
    calling = config.tool_config.function_calling_config if config.tool_config else None
    if calling is not None:
        if calling.mode is not None:
            out.tool_config.mode = _MODES.get(calling.mode, generation_pb2.FUNCTION_CALLING_MODE_UNSPECIFIED)
        out.tool_config.allowed_function_names.extend(calling.allowed_function_names or ())
    _generation(config, out.generation_config)
    return out


def _input_events(contents: list[types.Content]) -> list[event_pb2.Event]:
    """The request's own contents as the input events of a scratch turn
    (what agentctx cannot carry of a content is left out, as when stored)."""
    events = []
    for content in contents:
        proto, _ = _convert.content_to_proto(content)
        if proto is not None:
            events.append(event_pb2.Event(author="user" if proto.role == "user" else "model", content=proto))
    return events


def _instruction(value: Any) -> content_pb2.Content | None:
    if value is None:
        return None
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, types.Content):
        texts = [p.text for p in value.parts or () if p.text]
    elif isinstance(value, types.Part):
        texts = [value.text or ""]
    else:
        texts = [v if isinstance(v, str) else (getattr(v, "text", "") or "") for v in value]
    texts = [t for t in texts if t]
    if not texts:
        return None
    return content_pb2.Content(role="user", parts=[content_pb2.Part(text=t) for t in texts])


def _json_schema(value: Any) -> Any:
    """A genai Schema dump as JSON Schema: type names in lower case."""
    if isinstance(value, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _json_schema(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_schema(v) for v in value]
    return value


def _declaration(d: types.FunctionDeclaration) -> generation_pb2.FunctionDeclaration:
    out = generation_pb2.FunctionDeclaration(name=d.name or "", description=d.description or "")
    if d.parameters_json_schema is not None:
        params = _convert.to_struct(d.parameters_json_schema)
    elif d.parameters is not None:
        params = _convert.to_struct(_json_schema(d.parameters.model_dump(mode="json", exclude_none=True)))
    else:
        params = None
    if params is not None:
        out.parameters.CopyFrom(params)
    if d.response_json_schema is not None:
        response = _convert.to_struct(d.response_json_schema)
    elif d.response is not None:
        response = _convert.to_struct(_json_schema(d.response.model_dump(mode="json", exclude_none=True)))
    else:
        response = None
    if response is not None:
        out.response.CopyFrom(response)
    return out


def _generation(config: types.GenerateContentConfig, out: generation_pb2.GenerationConfig) -> None:
    if config.temperature is not None:
        out.temperature = config.temperature
    if config.top_p is not None:
        out.top_p = config.top_p
    if config.top_k is not None:
        out.top_k = int(config.top_k)
    if config.max_output_tokens is not None:
        out.max_output_tokens = config.max_output_tokens
    out.stop_sequences.extend(config.stop_sequences or ())
    if config.seed is not None:
        out.seed = config.seed
    if config.response_mime_type:
        out.response_mime_type = config.response_mime_type


def cache_record(info: cache_pb2.CacheMetadata) -> dict[str, Any]:
    """The call's public cache record (never a provider resource name)."""
    record: dict[str, Any] = {"state": cache_pb2.CacheState.Name(info.state).removeprefix("CACHE_STATE_")}
    if info.bypass_reason:
        record["bypass_reason"] = cache_pb2.CacheBypassReason.Name(info.bypass_reason).removeprefix(
            "CACHE_BYPASS_REASON_")
    if info.prefix_fingerprint:
        record["prefix_fingerprint"] = info.prefix_fingerprint
    if info.prefix_tokens:
        record["prefix_tokens"] = info.prefix_tokens
    if info.uses:
        record["uses"] = info.uses
    return record


def llm_response(response: pb.GenerateResponse) -> LlmResponse:
    reply = response.reply
    custom = _convert.from_struct(reply.custom_metadata) if reply.HasField("custom_metadata") else {}
    metadata: dict[str, Any] = {CACHE_METADATA_KEY: cache_record(reply.cache_metadata), "agentctx_reply_id": reply.id}
    if response.compactions:
        metadata["agentctx_compactions"] = len(response.compactions)
    # A context service before the reply's own fields sent them in custom_metadata.
    legacy = custom.get("finish_reason")
    finish = _convert.finish_reason_from_proto(reply.finish_reason) or (
        _convert.finish_reason_from_name(legacy) if isinstance(legacy, str) else None)
    return LlmResponse(
        content=_convert.content_from_proto(reply.content) if reply.HasField("content") else None,
        usage_metadata=_convert.usage_from_proto(reply.usage) if reply.HasField("usage") else None,
        finish_reason=finish,
        model_version=reply.model_version or custom.get("model_version") or None,
        error_code=reply.error_code or None,
        error_message=reply.error_message or None,
        custom_metadata=metadata,
    )
