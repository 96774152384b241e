"""Canonical (Gemini-like JSON) requests as Chat Completions parameters
(with ``prompt_cache_key`` for a PrefixMark), and completions and stream
chunks back (see openai.adapter)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from cache_service.domain.model import JSON, ModelCall, ModelReply, Usage
from cache_service.domain.ports import CacheRef, InvalidRequest, PrefixMark
from cache_service.providers.openai.settings import retention_params
from cache_service.providers.tool_ids import ToolIds

_FINISH = {"stop": "STOP", "tool_calls": "STOP", "function_call": "STOP", "length": "MAX_TOKENS",
           "content_filter": "SAFETY"}


def request_params(call: ModelCall, cache: CacheRef | None, *, send_cache_key: bool, retention: str | None,
                   compatible: bool) -> dict[str, Any]:
    """The Chat Completions parameters of ``call``; ``compatible``: a server other than OpenAI's."""
    params: dict[str, Any] = {"model": call.model, "messages": _messages(call)}
    tools = [_tool(f) for t in call.tools for f in t.get("functionDeclarations", ())]
    if tools:
        params["tools"] = tools
        choice = _tool_choice(call.tool_config)
        if choice is not None:
            params["tool_choice"] = choice
    if isinstance(cache, PrefixMark) and send_cache_key:
        params["prompt_cache_key"] = cache.key
        params.update(retention_params(call.model, retention))
    g = call.generation_config
    for ours, theirs in (("temperature", "temperature"), ("topP", "top_p"), ("seed", "seed"),
                         ("maxOutputTokens", "max_completion_tokens")):
        if g.get(ours) is not None:
            params[theirs] = g[ours]
    if g.get("stopSequences"):
        params["stop"] = list(g["stopSequences"])
    if g.get("responseMimeType") == "application/json":
        params["response_format"] = {"type": "json_object"}
    if g.get("topK") is not None and compatible:
        params["extra_body"] = {"top_k": g["topK"]}
    return params


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
    # cache_write_tokens: what the models that bill their writes (gpt-5.6 on) report writing.
    return Usage(prompt_tokens=prompt, cached_prompt_tokens=int(getattr(details, "cached_tokens", 0) or 0),
                 output_tokens=output, thoughts_tokens=int(getattr(output_details, "reasoning_tokens", 0) or 0),
                 total_tokens=int(u.total_tokens or prompt + output),
                 cache_write_tokens=int(getattr(details, "cache_write_tokens", 0) or 0))


def _call_part(tool_id: str, name: str, arguments: str) -> JSON | None:
    try:
        args = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return None
    return {"functionCall": {"id": tool_id, "name": name, "args": args if isinstance(args, dict) else {}}}


def reply(response: Any) -> ModelReply:
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


async def chunks(stream: Any, model: str) -> AsyncGenerator[ModelReply, None]:
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
