"""``openai``: OpenAI and OpenAI-compatible servers (vLLM, SGLang, Ollama)
through the ``openai`` SDK's Chat Completions API (an AUTOMATIC provider:
the server caches long prefixes by itself).

What the service steers: the request keeps its stable prefix first (system
instruction, tools, history), and every call of a scope carries the
scope's routing key as ``prompt_cache_key`` (``send_cache_key``), so its
calls land where its prefix is cached; ``retention`` (e.g. "24h") is sent
as ``prompt_cache_retention`` where the server offers it. Usage reports
``prompt_tokens_details.cached_tokens`` as the cached prompt tokens.

Content is converted from the canonical (Gemini-like) shape: the system
instruction becomes a system message, model contents assistant messages
(functionCall parts their tool_calls, arguments as JSON text), user
contents user messages, each functionResponse part a tool message (ids are
made up, pairwise, where a call has none); inline images become data URLs.
Thought parts are not sent. ``topK``, which OpenAI lacks, goes to
compatible servers only (those with a ``base_url``).

SDK retries are off (the caller owns retries); the HTTP client's request
logs are silenced. SDK exceptions are classified here and dropped: their
text can echo prompts or keys.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import openai

from agentctx_common.canonical import canonical_json
from cache_service.domain.keys import Prefix, estimate_tokens
from cache_service.domain.model import JSON, ModelCall, ModelReply, Usage
from cache_service.domain.ports import (
    CacheKind,
    CacheRef,
    ContextWindowExceeded,
    InvalidRequest,
    PrefixMark,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from cache_service.providers.http_logs import retry_after_s, silence_http_logs
from cache_service.providers.tool_ids import ToolIds

log = logging.getLogger("agentctx.cache.openai")
_WINDOW = re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.S)
_FINISH = {"stop": "STOP", "tool_calls": "STOP", "function_call": "STOP", "length": "MAX_TOKENS",
           "content_filter": "SAFETY"}
IN_MEMORY_TTL_S = 300.0  # OpenAI keeps a prefix 5 to 10 minutes past its last use
_RETENTION_S = {"24h": 86_400.0, "in_memory": IN_MEMORY_TTL_S}
# Without a key the SDK refuses to start; compatible servers often need none.
_NO_KEY = "no-key"


class OpenAIProvider:
    def __init__(
        self,
        *,
        name: str = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        request_timeout_s: float = 60.0,
        min_cache_tokens: int | None = None,
        send_cache_key: bool = True,
        retention: str | None = None,
    ) -> None:
        silence_http_logs()
        self.name = name
        self._compatible = base_url is not None
        self._client = openai.AsyncOpenAI(api_key=api_key or _NO_KEY, base_url=base_url, max_retries=0,
                                          timeout=request_timeout_s)
        self._min_cache_tokens = min_cache_tokens
        self._send_cache_key = send_cache_key
        self._retention = retention

    def __repr__(self) -> str:
        return f"OpenAIProvider({self.name})"

    @property
    def cache_kind(self) -> CacheKind:
        return CacheKind.AUTOMATIC

    @property
    def named_caches(self) -> None:
        return None

    def min_cache_tokens(self, model: str) -> int:
        # OpenAI caches prompts of 1,024 tokens and more.
        return self._min_cache_tokens if self._min_cache_tokens is not None else 1024

    def prefix_ttl_s(self, ttl_s: float) -> float:
        return _RETENTION_S.get(self._retention or "", IN_MEMORY_TTL_S)

    # --- model calls --------------------------------------------------------------

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        params = self.request_params(call, cache)
        try:
            response = await self._client.chat.completions.create(**params)
        except Exception as exc:  # noqa: BLE001 - classified, never re-raised as is
            raise _classify(exc) from None
        return _reply(response)

    async def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]:
        params = self.request_params(call, cache)
        try:
            stream = await self._client.chat.completions.create(**params, stream=True,
                                                                stream_options={"include_usage": True})
            async with contextlib.aclosing(_chunks(stream, call.model)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc) from None

    async def count_tokens(self, call: ModelCall) -> int:
        # Chat Completions has no counting endpoint: the registry's estimate.
        return estimate_tokens(len(canonical_json(Prefix.of_call(call, len(call.contents)).json())))

    async def close(self) -> None:
        try:
            await self._client.close()
        except Exception as exc:  # noqa: BLE001 - closing is best effort
            log.info("openai client close failed", extra={"error_type": type(exc).__name__})

    # --- requests -------------------------------------------------------------------

    def request_params(self, call: ModelCall, cache: CacheRef | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": call.model, "messages": _messages(call)}
        tools = [_tool(f) for t in call.tools for f in t.get("functionDeclarations", ())]
        if tools:
            params["tools"] = tools
            choice = _tool_choice(call.tool_config)
            if choice is not None:
                params["tool_choice"] = choice
        if isinstance(cache, PrefixMark) and self._send_cache_key:
            params["prompt_cache_key"] = cache.key
            if self._retention:
                params["prompt_cache_retention"] = self._retention
        g = call.generation_config
        for ours, theirs in (("temperature", "temperature"), ("topP", "top_p"), ("seed", "seed"),
                             ("maxOutputTokens", "max_completion_tokens")):
            if g.get(ours) is not None:
                params[theirs] = g[ours]
        if g.get("stopSequences"):
            params["stop"] = list(g["stopSequences"])
        if g.get("responseMimeType") == "application/json":
            params["response_format"] = {"type": "json_object"}
        if g.get("topK") is not None and self._compatible:
            params["extra_body"] = {"top_k": g["topK"]}
        return params


# --- errors -------------------------------------------------------------------------


def _classify(exc: BaseException) -> ProviderError:
    """A content-free ProviderError for an SDK or transport failure."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeout()
    if isinstance(exc, openai.APIConnectionError):
        return ProviderUnavailable(retry_after=1.0)
    if isinstance(exc, openai.APIError):
        body = exc.body if isinstance(exc.body, dict) else {}
        message = str(body.get("message") or "")
        code = str(body.get("code") or "")
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        retry = retry_after_s(exc.response.headers) if isinstance(exc, openai.APIStatusError) else None
        found = _WINDOW.search(message)
        if code == "context_length_exceeded" or found:
            return ContextWindowExceeded(status=status or 400,
                                         prompt_tokens=int(found.group(2)) if found else None,
                                         context_window=int(found.group(1)) if found else None)
        if code == "insufficient_quota":
            return ProviderPermissionDenied(status=status)  # a retry does not help
        if status == 429 or code == "rate_limit_exceeded":
            return RateLimited(status=status, retry_after=retry)
        if status is None:
            # An error inside a stream.
            return ProviderUnavailable(retry_after=1.0)
        if status in (401, 403):
            return ProviderPermissionDenied(status=status)
        if status in (408, 409) or status >= 500:
            return ProviderUnavailable(status=status, retry_after=retry or 1.0)
        return InvalidRequest(status=status)
    if isinstance(exc, (ValueError, TypeError, KeyError)):
        return InvalidRequest("the request could not be expressed for the OpenAI API")
    return ProviderUnavailable(retry_after=1.0)


# --- conversion ---------------------------------------------------------------------


def _tool(f: JSON) -> JSON:
    function: JSON = {"name": f.get("name", ""),
                      "parameters": json.loads(json.dumps(f["parameters"])) if f.get("parameters")
                      else {"type": "object", "properties": {}}}
    if f.get("description"):
        function["description"] = f["description"]
    return {"type": "function", "function": function}


def _tool_choice(d: JSON | None) -> Any:
    mode = (d or {}).get("mode")
    allowed = list((d or {}).get("allowedFunctionNames") or ())
    if mode == "NONE":
        return "none"
    if mode == "ANY":
        return {"type": "function", "function": {"name": allowed[0]}} if len(allowed) == 1 else "required"
    if mode in ("AUTO", "VALIDATED"):
        return "auto"
    return None


def _text(parts: Any) -> str:
    return "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))


def _user_part(p: JSON) -> JSON | None:
    if p.get("thought"):
        return None
    if "text" in p:
        return {"type": "text", "text": p["text"]}
    if "inlineData" in p and str(p["inlineData"].get("mimeType", "")).startswith("image/"):
        data = p["inlineData"]
        return {"type": "image_url", "image_url": {"url": f"data:{data['mimeType']};base64,{data.get('data', '')}"}}
    if "fileData" in p and str(p["fileData"].get("fileUri", "")).startswith(("https://", "http://")):
        return {"type": "image_url", "image_url": {"url": p["fileData"]["fileUri"]}}
    raise InvalidRequest("a part cannot be expressed for the OpenAI API", status=400)


def _messages(call: ModelCall) -> list[JSON]:
    out: list[JSON] = []
    system = _text((call.system_instruction or {}).get("parts", ()))
    if system:
        out.append({"role": "system", "content": system})
    ids = ToolIds("call_agentctx_")
    for content in call.contents:
        parts = content.get("parts", ())
        if content.get("role") == "model":
            message: JSON = {"role": "assistant", "content": _text(parts) or None}
            calls = [p["functionCall"] for p in parts if "functionCall" in p]
            if calls:
                message["tool_calls"] = [
                    {"id": ids.call(fc.get("name", ""), fc.get("id") or ""), "type": "function",
                     "function": {"name": fc.get("name", ""), "arguments": json.dumps(fc.get("args") or {},
                                                                                       sort_keys=True)}}
                    for fc in calls
                ]
            out.append(message)
            continue
        for p in parts:
            if "functionResponse" in p:
                fr = p["functionResponse"]
                out.append({"role": "tool", "tool_call_id": ids.response(fr.get("name", ""), fr.get("id") or ""),
                            "content": json.dumps(fr.get("response") or {}, sort_keys=True)})
        rest = [u for u in (_user_part(p) for p in parts if "functionResponse" not in p) if u is not None]
        if rest:
            plain = all(u["type"] == "text" for u in rest)
            out.append({"role": "user", "content": "".join(u["text"] for u in rest) if plain else rest})
    if not call.contents:
        raise InvalidRequest("contents must not be empty", status=400)
    return out


def _usage(u: Any) -> Usage | None:
    if u is None:
        return None
    details = getattr(u, "prompt_tokens_details", None)
    output_details = getattr(u, "completion_tokens_details", None)
    prompt = int(u.prompt_tokens or 0)
    output = int(u.completion_tokens or 0)
    return Usage(prompt_tokens=prompt, cached_prompt_tokens=int(getattr(details, "cached_tokens", 0) or 0),
                 output_tokens=output, thoughts_tokens=int(getattr(output_details, "reasoning_tokens", 0) or 0),
                 total_tokens=int(u.total_tokens or prompt + output))


def _call_part(tool_id: str, name: str, arguments: str) -> JSON | None:
    try:
        args = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return None
    return {"functionCall": {"id": tool_id, "name": name, "args": args if isinstance(args, dict) else {}}}


def _reply(response: Any) -> ModelReply:
    choice = response.choices[0] if response.choices else None
    parts: list[JSON] = []
    finish = ""
    if choice is not None:
        message = choice.message
        if message.content:
            parts.append({"text": message.content})
        for tc in message.tool_calls or []:
            part = _call_part(tc.id, tc.function.name, tc.function.arguments)
            if part is None:
                finish = "MALFORMED_FUNCTION_CALL"
                continue
            parts.append(part)
        raw = choice.finish_reason or ""
        finish = finish or _FINISH.get(raw, "OTHER" if raw else "")
    return ModelReply(content={"role": "model", "parts": parts} if parts else None, finish_reason=finish,
                      usage=_usage(response.usage), model_version=response.model or "")


async def _chunks(stream: Any, model: str) -> AsyncGenerator[ModelReply, None]:
    """Text deltas as they come; tool calls once complete, with the finish
    reason; usage on the last chunk (without choices)."""
    tools: dict[int, JSON] = {}
    version = model
    finish = ""
    try:
        async for chunk in stream:
            version = chunk.model or version
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is not None and delta.content:
                    yield ModelReply(content={"role": "model", "parts": [{"text": delta.content}]},
                                     model_version=version)
                for tc in (delta.tool_calls if delta is not None else None) or []:
                    slot = tools.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
                if choice.finish_reason:
                    finish = _FINISH.get(choice.finish_reason, "OTHER")
                    parts = [_call_part(t["id"], t["name"], t["arguments"]) for _, t in sorted(tools.items())]
                    if any(p is None for p in parts):
                        finish = "MALFORMED_FUNCTION_CALL"
                    good = [p for p in parts if p is not None]
                    tools.clear()
                    if good:
                        yield ModelReply(content={"role": "model", "parts": good}, model_version=version)
            if chunk.usage is not None:
                yield ModelReply(finish_reason=finish, usage=_usage(chunk.usage), model_version=version)
                finish = ""
        if finish:
            yield ModelReply(finish_reason=finish, model_version=version)
    finally:
        await stream.close()
