"""``gemini``: Gemini through google-genai, on the Gemini API (API key) or
Vertex AI (project, location, Application Default Credentials).

Explicit caches map to ``client.aio.caches`` (create/get/update/delete/list)
and model calls to ``client.aio.models.generate_content[_stream]``. A call
naming a cache carries ``cached_content`` plus the uncached suffix only (the
domain has already removed system instruction, tools and tool config).

Embeddings map to ``client.aio.models.embed_content`` (the Gemini API's
``batchEmbedContents``, at most ``MAX_EMBED_TEXTS`` texts a call), the
call's task as ``taskType`` and its dimensions as ``outputDimensionality``.

SDK retries are off (the registry and the caller own retries), and so is
automatic function calling. The HTTP client's request logs are silenced:
their URLs hold resource names. SDK exceptions are classified by the shared
table (providers.errors, read by gemini.errors) and dropped.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from google import genai
from google.genai import types

from cache_service.domain.model import CacheHandle, CacheSpec, ListedCache, ModelCall, ModelReply, ResourceName
from cache_service.domain.ports import CacheKind, CacheRef, EmbedCall, Embeddings, EmbedTask
from cache_service.providers.gemini import wire
from cache_service.providers.gemini.errors import GeminiErrors
from cache_service.providers.gemini.settings import default_min_cache_tokens
from cache_service.providers.http_logs import silence_http_logs

log = logging.getLogger("agentctx.cache.gemini")
_LIST_LIMIT = 1000
# batchEmbedContents takes at most 100 requests.
MAX_EMBED_TEXTS = 100
_ERRORS = GeminiErrors()


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
        silence_http_logs("google_genai")
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
        return default_min_cache_tokens(model)

    # --- caches -------------------------------------------------------------------

    async def create_cache(self, spec: CacheSpec) -> CacheHandle:
        config = types.CreateCachedContentConfig(
            contents=[wire.content(c) for c in spec.contents] or None,
            system_instruction=wire.system(spec.system_instruction),
            tools=[wire.tool(t) for t in spec.tools] or None,
            tool_config=wire.tool_config(spec.tool_config),
            ttl=f"{round(spec.ttl_s)}s",
            display_name=spec.display_name,
        )
        with _ERRORS.mapped():
            cached = await self._client.aio.caches.create(model=spec.model, config=config)
        return wire.handle(cached, spec.ttl_s)

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle:
        with _ERRORS.mapped(cached=True):
            cached = await self._client.aio.caches.update(
                name=name.reveal(), config=types.UpdateCachedContentConfig(ttl=f"{round(ttl_s)}s")
            )
        return wire.handle(cached, ttl_s)

    async def delete_cache(self, name: ResourceName) -> None:
        with _ERRORS.mapped(cached=True):
            await self._client.aio.caches.delete(name=name.reveal())

    async def list_caches(self) -> list[ListedCache]:
        out: list[ListedCache] = []
        with _ERRORS.mapped():
            pager = await self._client.aio.caches.list(config=types.ListCachedContentsConfig(page_size=100))
            async for c in pager:
                if c.name:
                    expire = c.expire_time.timestamp() if c.expire_time else 0.0
                    out.append(ListedCache(ResourceName(c.name), c.display_name or "", expire))
                if len(out) >= _LIST_LIMIT:
                    break
        return out

    # --- model calls --------------------------------------------------------------

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        cached = cache if isinstance(cache, ResourceName) else None
        with _ERRORS.mapped(cached=cached is not None):
            response = await self._client.aio.models.generate_content(
                model=call.model, contents=[wire.content(c) for c in call.contents], config=wire.config(call, cached)
            )
        return wire.reply(response, last=True)

    async def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]:
        cached = cache if isinstance(cache, ResourceName) else None
        with _ERRORS.mapped(cached=cached is not None):
            stream = await self._client.aio.models.generate_content_stream(
                model=call.model, contents=[wire.content(c) for c in call.contents], config=wire.config(call, cached)
            )
            # Closed even when our consumer stops early, releasing the connection.
            async with contextlib.aclosing(stream):  # type: ignore[type-var]
                async for response in stream:
                    yield wire.reply(response, last=False)

    async def count_tokens(self, call: ModelCall) -> int:
        with _ERRORS.mapped():
            result = await self._client.aio.models.count_tokens(
                model=call.model, contents=[wire.content(c) for c in call.contents]
            )
        return result.total_tokens or 0

    # --- embeddings -----------------------------------------------------------------

    @property
    def max_embed_texts(self) -> int:
        return MAX_EMBED_TEXTS

    async def embed(self, call: EmbedCall) -> Embeddings:
        config = types.EmbedContentConfig(
            task_type=None if call.task is EmbedTask.UNSPECIFIED else call.task.value,
            output_dimensionality=call.dimensions,
        )
        with _ERRORS.mapped():
            response = await self._client.aio.models.embed_content(
                model=call.model, contents=list(call.texts), config=config
            )
        vectors = tuple(tuple(e.values or ()) for e in response.embeddings or ())
        return Embeddings(vectors)

    async def close(self) -> None:
        try:
            await self._client.aio.aclose()
        except Exception as exc:  # noqa: BLE001 - closing is best effort
            log.info("gemini client close failed", extra={"error_type": type(exc).__name__})
