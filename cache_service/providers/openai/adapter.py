"""``openai``: OpenAI and OpenAI-compatible servers (vLLM, SGLang, Ollama)
through the ``openai`` SDK's Chat Completions API (an AUTOMATIC provider:
the server caches long prefixes by itself).

What the service steers: the request keeps its stable prefix first (system
instruction, tools, history), and every call of a scope carries the
scope's routing key as ``prompt_cache_key`` (``send_cache_key``), so its
calls land where its prefix is cached; ``retention`` (e.g. "24h") is sent
as what each model accepts (settings.retention_params: as is before
gpt-5.5, "24h" to gpt-5.5, ``prompt_cache_options.ttl`` from gpt-5.6). Usage reports
``prompt_tokens_details.cached_tokens`` as the cached prompt tokens.

Content is converted from the canonical (Gemini-like) shape: the system
instruction becomes a system message, model contents assistant messages
(functionCall parts their tool_calls, arguments as JSON text), user
contents user messages, each functionResponse part a tool message (ids are
made up, pairwise, where a call has none); inline images become data URLs.
Thought parts are not sent. ``topK``, which OpenAI lacks, goes to
compatible servers only (those with a ``base_url``).

Embeddings map to ``client.embeddings.create`` (``/v1/embeddings``, at
most ``MAX_EMBED_TEXTS`` inputs a call; ``dimensions`` when the call asks;
the SDK's base64 transfer encoding, decoded by the SDK).

SDK retries are off (the caller owns retries); the HTTP client's request
logs are silenced. SDK exceptions are classified by the shared table
(providers.errors, read by openai.errors) and dropped.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import openai

from agentctx_common.canonical import canonical_json
from cache_service.domain.keys import Prefix, estimate_tokens
from cache_service.domain.model import ModelCall, ModelReply
from cache_service.domain.ports import CacheKind, CacheRef, EmbedCall, Embeddings
from cache_service.providers.http_logs import silence_http_logs
from cache_service.providers.openai import wire
from cache_service.providers.openai.errors import OpenAIErrors
from cache_service.providers.openai.settings import DEFAULT_MIN_CACHE_TOKENS, IN_MEMORY_TTL_S, RETENTION_S

log = logging.getLogger("agentctx.cache.openai")
# Without a key the SDK refuses to start; compatible servers often need none.
_NO_KEY = "no-key"
_ERRORS = OpenAIErrors()
# /v1/embeddings takes at most 2048 inputs.
MAX_EMBED_TEXTS = 2048


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
        silence_http_logs("openai")
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
        return self._min_cache_tokens if self._min_cache_tokens is not None else DEFAULT_MIN_CACHE_TOKENS

    def prefix_ttl_s(self, ttl_s: float) -> float:
        return RETENTION_S.get(self._retention or "", IN_MEMORY_TTL_S)

    # --- model calls --------------------------------------------------------------

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        params = self.request_params(call, cache)
        with _ERRORS.mapped():
            response = await self._client.chat.completions.create(**params)
        return wire.reply(response)

    async def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]:
        params = self.request_params(call, cache)
        with _ERRORS.mapped():
            stream = await self._client.chat.completions.create(**params, stream=True,
                                                                stream_options={"include_usage": True})
            async with contextlib.aclosing(wire.chunks(stream, call.model)) as chunks:
                async for chunk in chunks:
                    yield chunk

    async def count_tokens(self, call: ModelCall) -> int:
        # Chat Completions has no counting endpoint: the registry's estimate.
        return estimate_tokens(len(canonical_json(Prefix.of_call(call, len(call.contents)).json())))

    # --- embeddings -----------------------------------------------------------------

    @property
    def max_embed_texts(self) -> int:
        return MAX_EMBED_TEXTS

    async def embed(self, call: EmbedCall) -> Embeddings:
        with _ERRORS.mapped():
            if call.dimensions is not None:
                response = await self._client.embeddings.create(model=call.model, input=list(call.texts),
                                                                 dimensions=call.dimensions)
            else:
                response = await self._client.embeddings.create(model=call.model, input=list(call.texts))
        ordered = sorted(response.data, key=lambda d: d.index)
        usage = response.usage.prompt_tokens if response.usage is not None else 0
        return Embeddings(tuple(tuple(d.embedding) for d in ordered), usage)

    async def close(self) -> None:
        try:
            await self._client.close()
        except Exception as exc:  # noqa: BLE001 - closing is best effort
            log.info("openai client close failed", extra={"error_type": type(exc).__name__})

    def request_params(self, call: ModelCall, cache: CacheRef | None) -> dict[str, Any]:
        return wire.request_params(call, cache, send_cache_key=self._send_cache_key, retention=self._retention,
                                   compatible=self._compatible)
