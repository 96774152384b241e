"""Canonical (Gemini-like JSON) requests and google-genai types, both ways:
contents, system instruction, tools, tool config and generation config
out; candidates, usage and cache handles back."""

from __future__ import annotations

import base64
import copy
import time
from typing import Any

from google.genai import types

from cache_service.domain.model import JSON, CacheHandle, ModelCall, ModelReply, ResourceName, Usage
from cache_service.domain.ports import ProviderUnavailable


def _b64(text: str) -> bytes:
    return base64.b64decode(text) if text else b""


def _part(d: JSON) -> types.Part:
    kw: dict[str, Any] = {}
    if "text" in d:
        kw["text"] = d["text"]
    elif "inlineData" in d:
        kw["inline_data"] = types.Blob(mime_type=d["inlineData"].get("mimeType"), data=_b64(d["inlineData"].get("data", "")))
    elif "fileData" in d:
        kw["file_data"] = types.FileData(mime_type=d["fileData"].get("mimeType") or None, file_uri=d["fileData"].get("fileUri"))
    elif "functionCall" in d:
        fc = d["functionCall"]
        kw["function_call"] = types.FunctionCall(id=fc.get("id") or None, name=fc.get("name"),
                                                 args=copy.deepcopy(fc.get("args") or {}))
    elif "functionResponse" in d:
        fr = d["functionResponse"]
        kw["function_response"] = types.FunctionResponse(id=fr.get("id") or None, name=fr.get("name"),
                                                         response=copy.deepcopy(fr.get("response") or {}))
    if d.get("thought"):
        kw["thought"] = True
    if d.get("thoughtSignature"):
        kw["thought_signature"] = _b64(d["thoughtSignature"])
    return types.Part(**kw)


def content(d: JSON) -> types.Content:
    return types.Content(role=d.get("role") or "user", parts=[_part(p) for p in d.get("parts", ())])


def system(d: JSON | None) -> types.Content | None:
    if not d or not d.get("parts"):
        return None
    return types.Content(role="user", parts=[_part(p) for p in d["parts"]])


def tool(d: JSON) -> types.Tool:
    declarations = []
    for f in d.get("functionDeclarations", ()):
        declarations.append(types.FunctionDeclaration(
            name=f.get("name"),
            description=f.get("description") or None,
            parameters_json_schema=copy.deepcopy(f["parameters"]) if f.get("parameters") else None,
            response_json_schema=copy.deepcopy(f["response"]) if f.get("response") else None,
        ))
    return types.Tool(function_declarations=declarations)


def tool_config(d: JSON | None) -> types.ToolConfig | None:
    if d is None:
        return None
    mode = d.get("mode")
    return types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
        mode=mode if mode and mode != "UNSPECIFIED" else None,
        allowed_function_names=list(d.get("allowedFunctionNames") or ()) or None,
    ))


def config(call: ModelCall, cached: ResourceName | None) -> types.GenerateContentConfig:
    g = call.generation_config
    return types.GenerateContentConfig(
        cached_content=cached.reveal() if cached is not None else None,
        system_instruction=system(call.system_instruction),
        tools=[tool(t) for t in call.tools] or None,
        tool_config=tool_config(call.tool_config),
        temperature=g.get("temperature"),
        top_p=g.get("topP"),
        top_k=g.get("topK"),
        max_output_tokens=g.get("maxOutputTokens"),
        stop_sequences=list(g["stopSequences"]) if g.get("stopSequences") else None,
        seed=g.get("seed"),
        response_mime_type=g.get("responseMimeType"),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def _part_json(p: types.Part) -> JSON:
    out: JSON = {}
    if p.text is not None:
        out["text"] = p.text
    elif p.inline_data is not None:
        out["inlineData"] = {"mimeType": p.inline_data.mime_type or "",
                             "data": base64.b64encode(p.inline_data.data or b"").decode()}
    elif p.file_data is not None:
        out["fileData"] = {"mimeType": p.file_data.mime_type or "", "fileUri": p.file_data.file_uri or ""}
    elif p.function_call is not None:
        out["functionCall"] = {"id": p.function_call.id or "", "name": p.function_call.name or "",
                               "args": p.function_call.args or {}}
    elif p.function_response is not None:
        out["functionResponse"] = {"id": p.function_response.id or "", "name": p.function_response.name or "",
                                   "response": p.function_response.response or {}}
    else:
        return {}
    if p.thought:
        out["thought"] = True
    if p.thought_signature:
        out["thoughtSignature"] = base64.b64encode(p.thought_signature).decode()
    return out


def reply(r: types.GenerateContentResponse, *, last: bool) -> ModelReply:
    candidate = r.candidates[0] if r.candidates else None
    content = None
    finish = ""
    if candidate is not None:
        if candidate.content is not None and candidate.content.parts:
            parts = [pj for pj in (_part_json(p) for p in candidate.content.parts) if pj]
            content = {"role": "model", "parts": parts}
        if candidate.finish_reason is not None:
            finish = candidate.finish_reason.value if hasattr(candidate.finish_reason, "value") else str(candidate.finish_reason)
            finish = finish if finish != "FINISH_REASON_UNSPECIFIED" else ""
    usage = None
    # Streams repeat usage on many chunks; only the final one carries it here.
    if r.usage_metadata is not None and (last or finish):
        u = r.usage_metadata
        usage = Usage(
            prompt_tokens=u.prompt_token_count or 0,
            cached_prompt_tokens=u.cached_content_token_count or 0,
            output_tokens=u.candidates_token_count or 0,
            thoughts_tokens=u.thoughts_token_count or 0,
            total_tokens=u.total_token_count or 0,
        )
    return ModelReply(content=content, finish_reason=finish, usage=usage, model_version=r.model_version or "")


def handle(cached: types.CachedContent, ttl_s: float) -> CacheHandle:
    if not cached.name:
        raise ProviderUnavailable("the provider returned a cache without a name")
    expire = cached.expire_time.timestamp() if cached.expire_time else time.time() + ttl_s
    tokens = cached.usage_metadata.total_token_count if cached.usage_metadata else None
    return CacheHandle(ResourceName(cached.name), expire, tokens)
