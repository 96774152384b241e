"""``gemini``: Gemini through google-genai, on the Gemini API (API key) or
Vertex AI (project, location, Application Default Credentials).

Explicit caches map to ``client.aio.caches`` (create/get/update/delete/list)
and model calls to ``client.aio.models.generate_content[_stream]``. A call
naming a cache carries ``cached_content`` plus the uncached suffix only (the
domain has already removed system instruction, tools and tool config).

SDK retries are off (the registry and the caller own retries), and so is
automatic function calling. The HTTP client's request logs are silenced:
their URLs hold resource names. SDK exceptions are classified here and
dropped: their text can echo prompts, resource names or keys.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from cache_service.domain.model import (
    JSON,
    CacheHandle,
    CacheSpec,
    ListedCache,
    ModelCall,
    ModelReply,
    ResourceName,
    Usage,
)
from cache_service.domain.ports import (
    CacheKind,
    CacheNotFound,
    CacheRef,
    CacheTooSmall,
    ContextWindowExceeded,
    InvalidRequest,
    ProviderError,
    ProviderPermissionDenied,
    ProviderUnavailable,
    RateLimited,
)

log = logging.getLogger("agentctx.cache.gemini")
_QUIET = ("httpx", "httpx2", "httpcore", "httpcore2", "google_genai")
_MIN_TOKENS = re.compile(r"min_total_token_count\D{0,5}(\d+)")
_WINDOW = re.compile(r"input token count \(?(\d+)\)?.*?allowed \(?(\d+)\)?")
_LIST_LIMIT = 1000


def _silence_http_logs() -> None:
    for name in _QUIET:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)


class GeminiProvider:
    def __init__(
        self,
        *,
        name: str = "gemini",
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str | None = None,
        vertexai: bool = False,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        request_timeout_s: float = 60.0,
        min_cache_tokens: int | None = None,
    ) -> None:
        _silence_http_logs()
        self.name = name
        options = types.HttpOptions(
            base_url=base_url,
            api_version=api_version or ("v1beta1" if vertexai else "v1beta"),
            timeout=int(request_timeout_s * 1000),
        )
        if vertexai:
            self._client = genai.Client(vertexai=True, project=project, location=location, credentials=credentials,
                                        http_options=options)
        else:
            self._client = genai.Client(api_key=api_key, http_options=options)
        self._min_cache_tokens = min_cache_tokens

    def __repr__(self) -> str:
        return "GeminiProvider()"

    @property
    def cache_kind(self) -> CacheKind:
        return CacheKind.NAMED

    @property
    def named_caches(self) -> GeminiProvider:
        return self

    def prefix_ttl_s(self, ttl_s: float) -> float:
        return ttl_s

    def min_cache_tokens(self, model: str) -> int:
        if self._min_cache_tokens is not None:
            return self._min_cache_tokens
        # adk-python's floors; the service's "too small" answer is authoritative.
        return 4096 if model.removeprefix("models/").startswith("gemini-3") else 2048

    # --- caches -------------------------------------------------------------------

    async def create_cache(self, spec: CacheSpec) -> CacheHandle:
        config = types.CreateCachedContentConfig(
            contents=[_content(c) for c in spec.contents] or None,
            system_instruction=_system(spec.system_instruction),
            tools=[_tool(t) for t in spec.tools] or None,
            tool_config=_tool_config(spec.tool_config),
            ttl=f"{round(spec.ttl_s)}s",
            display_name=spec.display_name,
        )
        try:
            cached = await self._client.aio.caches.create(model=spec.model, config=config)
        except Exception as exc:  # noqa: BLE001 - classified, never re-raised as is
            raise _classify(exc, cached=False) from None
        return _handle(cached, spec.ttl_s)

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle:
        try:
            cached = await self._client.aio.caches.update(
                name=name.reveal(), config=types.UpdateCachedContentConfig(ttl=f"{round(ttl_s)}s")
            )
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, cached=True) from None
        return _handle(cached, ttl_s)

    async def delete_cache(self, name: ResourceName) -> None:
        try:
            await self._client.aio.caches.delete(name=name.reveal())
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, cached=True) from None

    async def list_caches(self) -> list[ListedCache]:
        out: list[ListedCache] = []
        try:
            pager = await self._client.aio.caches.list(config=types.ListCachedContentsConfig(page_size=100))
            async for c in pager:
                if c.name:
                    expire = c.expire_time.timestamp() if c.expire_time else 0.0
                    out.append(ListedCache(ResourceName(c.name), c.display_name or "", expire))
                if len(out) >= _LIST_LIMIT:
                    break
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, cached=False) from None
        return out

    # --- model calls --------------------------------------------------------------

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        cached = cache if isinstance(cache, ResourceName) else None
        try:
            response = await self._client.aio.models.generate_content(
                model=call.model, contents=[_content(c) for c in call.contents], config=_config(call, cached)
            )
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, cached=cached is not None) from None
        return _reply(response, last=True)

    async def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]:
        cached = cache if isinstance(cache, ResourceName) else None
        try:
            stream = await self._client.aio.models.generate_content_stream(
                model=call.model, contents=[_content(c) for c in call.contents], config=_config(call, cached)
            )
            # Closed even when our consumer stops early, releasing the connection.
            async with contextlib.aclosing(stream):  # type: ignore[type-var]
                async for response in stream:
                    yield _reply(response, last=False)
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, cached=cached is not None) from None

    async def count_tokens(self, call: ModelCall) -> int:
        try:
            result = await self._client.aio.models.count_tokens(
                model=call.model, contents=[_content(c) for c in call.contents]
            )
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, cached=False) from None
        return result.total_tokens or 0

    async def close(self) -> None:
        try:
            await self._client.aio.aclose()
        except Exception as exc:  # noqa: BLE001 - closing is best effort
            log.info("gemini client close failed", extra={"error_type": type(exc).__name__})


# --- errors -------------------------------------------------------------------------


def _classify(exc: Exception, *, cached: bool) -> ProviderError:
    """A content-free ProviderError for an SDK or transport failure."""
    if isinstance(exc, ProviderError):
        return exc
    if not isinstance(exc, genai_errors.APIError):
        if isinstance(exc, (ValueError, TypeError)):
            return InvalidRequest("the request could not be expressed for the Gemini API")
        return ProviderUnavailable(retry_after=1.0)
    code = exc.code or 0
    message = (exc.message or "").lower()
    compact = message.replace(" ", "").replace("_", "")
    names_cache = "cachedcontent" in compact
    if code == 429:
        return RateLimited(status=code, retry_after=_retry_delay(exc.details))
    if cached and (code == 404 or (code in (400, 403) and names_cache and ("notfound" in compact or code == 403))):
        return CacheNotFound(status=code)
    if code == 400 and ("too small" in message or "mintotaltokencount" in compact):
        found = _MIN_TOKENS.search(message)
        return CacheTooSmall(status=code, min_tokens=int(found.group(1)) if found else None)
    if code == 400 and ("exceeds the maximum number of tokens" in message or "context window" in message):
        found = _WINDOW.search(message)
        return ContextWindowExceeded(
            status=code,
            prompt_tokens=int(found.group(1)) if found else None,
            context_window=int(found.group(2)) if found else None,
        )
    if code in (401, 403):
        return ProviderPermissionDenied(status=code)
    if code == 408 or code >= 500:
        return ProviderUnavailable(status=code, retry_after=_retry_delay(exc.details) or 1.0)
    return InvalidRequest(status=code)


def _retry_delay(details: Any) -> float | None:
    try:
        for d in details.get("error", {}).get("details", []) or []:
            if str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
                return float(str(d.get("retryDelay", "")).rstrip("s"))
    except (AttributeError, ValueError, TypeError):
        return None
    return None


# --- conversion ---------------------------------------------------------------------


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


def _content(d: JSON) -> types.Content:
    return types.Content(role=d.get("role") or "user", parts=[_part(p) for p in d.get("parts", ())])


def _system(d: JSON | None) -> types.Content | None:
    if not d or not d.get("parts"):
        return None
    return types.Content(role="user", parts=[_part(p) for p in d["parts"]])


def _tool(d: JSON) -> types.Tool:
    declarations = []
    for f in d.get("functionDeclarations", ()):
        declarations.append(types.FunctionDeclaration(
            name=f.get("name"),
            description=f.get("description") or None,
            parameters_json_schema=copy.deepcopy(f["parameters"]) if f.get("parameters") else None,
            response_json_schema=copy.deepcopy(f["response"]) if f.get("response") else None,
        ))
    return types.Tool(function_declarations=declarations)


def _tool_config(d: JSON | None) -> types.ToolConfig | None:
    if d is None:
        return None
    mode = d.get("mode")
    return types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
        mode=mode if mode and mode != "UNSPECIFIED" else None,
        allowed_function_names=list(d.get("allowedFunctionNames") or ()) or None,
    ))


def _config(call: ModelCall, cached: ResourceName | None) -> types.GenerateContentConfig:
    g = call.generation_config
    return types.GenerateContentConfig(
        cached_content=cached.reveal() if cached is not None else None,
        system_instruction=_system(call.system_instruction),
        tools=[_tool(t) for t in call.tools] or None,
        tool_config=_tool_config(call.tool_config),
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


def _reply(r: types.GenerateContentResponse, *, last: bool) -> ModelReply:
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


def _handle(cached: types.CachedContent, ttl_s: float) -> CacheHandle:
    if not cached.name:
        raise ProviderUnavailable("the provider returned a cache without a name")
    expire = cached.expire_time.timestamp() if cached.expire_time else time.time() + ttl_s
    tokens = cached.usage_metadata.total_token_count if cached.usage_metadata else None
    return CacheHandle(ResourceName(cached.name), expire, tokens)
