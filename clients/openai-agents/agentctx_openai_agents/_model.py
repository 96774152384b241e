"""``AgentCtxModel``: an OpenAI Agents SDK ``Model`` whose calls go through
agentctx's cache tier (a Generate with ``TURN_STORAGE_NONE``), so an agent
gets prefix caching on every provider the cache service serves and never
holds a provider key. ``AgentCtxModelProvider`` hands one out per model
name (``RunConfig(model_provider=...)``).

Each call sends the SDK's own input (the session's items and the new ones)
as the turn's input, in the app's and user's scratch session
``agentctx:scratch`` (made with the prefix cache on unless ``cache=False``),
which stores nothing; the cache tier caches the
request's stable prefix (instructions, tools, earlier turns) as for any
Generate. Function tools and handoffs are sent as function declarations;
hosted tools are refused with a ValueError naming the tool.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agents import FunctionTool, Handoff, ModelResponse, ModelSettings, Usage
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.tool import Tool
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import generation_pb2
from agentctx_client import (
    TURN_STORAGE_NONE,
    AlreadyExistsError,
    ContextClient,
    Event,
    FunctionDeclaration,
    GenerateResult,
    session_name,
)
from agentctx_openai_agents import _items

SCRATCH_SESSION_ID = "agentctx:scratch"
_MODES = {"auto": generation_pb2.FUNCTION_CALLING_MODE_AUTO, "required": generation_pb2.FUNCTION_CALLING_MODE_ANY,
          "none": generation_pb2.FUNCTION_CALLING_MODE_NONE}


class AgentCtxModel(Model):
    def __init__(self, client: ContextClient, model: str = "", *, app: str, user: str = "user",
                 cache: bool = True, timeout: float | None = None) -> None:
        self.client = client
        self.model = model
        self.app = app
        self.user = user
        self.timeout = timeout
        self.cache = cache
        self.scratch = session_name(app, user, SCRATCH_SESSION_ID)
        self._scratch_made = False
        # The call's public cache record (state, bypass reason; never a
        # provider resource name), for the last call made.
        self.last_cache: Any = None

    async def get_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                           model_settings: ModelSettings, tools: list[Tool],
                           output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff],
                           tracing: ModelTracing, *, previous_response_id: str | None = None,
                           conversation_id: str | None = None, prompt: Any = None) -> ModelResponse:
        result = await self._generate(system_instructions, input, model_settings, tools, output_schema, handoffs)
        return ModelResponse(output=_output(result), usage=_usage(result), response_id=None)

    async def stream_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                              model_settings: ModelSettings, tools: list[Tool],
                              output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff],
                              tracing: ModelTracing, *, previous_response_id: str | None = None,
                              conversation_id: str | None = None, prompt: Any = None,
                              ) -> AsyncIterator[TResponseStreamEvent]:
        """The whole reply as one ``response.completed`` event: the reply is
        only whole once the cache tier has it."""
        result = await self._generate(system_instructions, input, model_settings, tools, output_schema, handoffs)
        usage = _usage(result)
        response = Response(
            id=f"resp_{uuid.uuid4().hex}", created_at=time.time(), model=self.model, object="response",
            output=_output(result), parallel_tool_calls=True, tool_choice="auto", tools=[],
            usage=ResponseUsage(
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=usage.total_tokens,
                input_tokens_details=usage.input_tokens_details, output_tokens_details=usage.output_tokens_details),
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)

    async def _generate(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                        settings: ModelSettings, tools: Sequence[Tool], output_schema: AgentOutputSchemaBase | None,
                        handoffs: Sequence[Handoff]) -> GenerateResult:
        await self._ensure_scratch()
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        names = _items.call_names(items)
        events = [e for e in (_items.item_event(i, "", names) for i in items) if e.content is not None]
        declarations = [_declaration(t) for t in tools] + [
            FunctionDeclaration(h.tool_name, h.tool_description, h.input_json_schema) for h in handoffs]
        config = generation_pb2.GenerationConfig()
        if settings.temperature is not None:
            config.temperature = settings.temperature
        if settings.top_p is not None:
            config.top_p = settings.top_p
        if settings.max_tokens is not None:
            config.max_output_tokens = settings.max_tokens
        if output_schema is not None and not output_schema.is_plain_text():
            config.response_mime_type = "application/json"
        result = await self.client.generate(
            self.scratch, [Event(content=e.content, author=e.author) for e in events],
            system_instruction=system_instructions or None, tools=declarations,
            tool_config=_tool_config(settings.tool_choice), generation_config=config, model=self.model,
            storage=TURN_STORAGE_NONE, timeout=self.timeout)
        self.last_cache = result.reply.proto.cache_metadata if result.reply.proto is not None else None
        return result

    async def _ensure_scratch(self) -> None:
        if self._scratch_made:
            return
        try:
            config = policy_pb2.ContextConfig(cache=policy_pb2.CachePolicy(enabled=self.cache))
            await self.client.create_session(self.app, self.user, session_id=SCRATCH_SESSION_ID, model=self.model,
                                             config=config)
        except AlreadyExistsError:
            pass
        self._scratch_made = True


class AgentCtxModelProvider(ModelProvider):
    """``get_model(name)``: an ``AgentCtxModel`` for ``name`` (the
    default model when None), one per name."""

    def __init__(self, client: ContextClient, *, app: str, user: str = "user", default_model: str = "") -> None:
        self.client, self.app, self.user, self.default_model = client, app, user, default_model
        self._models: dict[str, AgentCtxModel] = {}

    def get_model(self, model_name: str | None) -> Model:
        name = model_name or self.default_model
        if name not in self._models:
            self._models[name] = AgentCtxModel(self.client, name, app=self.app, user=self.user)
        return self._models[name]


def _declaration(tool: Tool) -> FunctionDeclaration:
    if not isinstance(tool, FunctionTool):
        raise ValueError(f"AgentCtxModel sends function tools only, not {type(tool).__name__} {tool.name!r}")
    return FunctionDeclaration(tool.name, tool.description, tool.params_json_schema)


def _tool_config(choice: Any) -> generation_pb2.ToolConfig | None:
    if choice is None:
        return None
    if isinstance(choice, str) and choice in _MODES:
        return generation_pb2.ToolConfig(mode=_MODES[choice])
    name = choice if isinstance(choice, str) else getattr(choice, "name", None)
    if not isinstance(name, str):
        raise ValueError(f"AgentCtxModel cannot send tool_choice {choice!r}")
    return generation_pb2.ToolConfig(mode=generation_pb2.FUNCTION_CALLING_MODE_ANY, allowed_function_names=[name])


def _output(result: GenerateResult) -> list[Any]:
    content = result.reply.content
    parts = content.parts if content is not None else ()
    out: list[Any] = []
    texts = [p.text for p in parts if p.text and not p.thought]
    if texts:
        out.append(ResponseOutputMessage(
            id=f"msg_{result.reply.id}", type="message", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text="".join(texts), annotations=[])]))
    for part in parts:
        call = part.function_call
        if call is not None:
            out.append(ResponseFunctionToolCall(type="function_call", call_id=call.id, name=call.name,
                                                arguments=json.dumps(call.args), status="completed"))
    return out


def _usage(result: GenerateResult) -> Usage:
    u = result.reply.usage
    if u is None:
        return Usage(requests=1)
    return Usage(requests=1, input_tokens=u.prompt_tokens, output_tokens=u.output_tokens, total_tokens=u.total_tokens,
                 input_tokens_details=InputTokensDetails(cached_tokens=u.cached_prompt_tokens,
                                                         cache_write_tokens=u.cache_write_tokens),
                 output_tokens_details=OutputTokensDetails(reasoning_tokens=u.thoughts_tokens))
