"""``anthropic``: Claude through the ``anthropic`` SDK's Messages API (a
MARKED provider: prompt caching by ``cache_control`` breakpoints).

A call with a PrefixMark carries the whole request with breakpoints after
the system instruction and tools (shared by every conversation of the
scope), after the leased prefix and, with ``write_through``, at the end of
the request (three of Anthropic's four), with the 1-hour TTL when the TTL
asked exceeds 5 minutes. Anthropic looks for a written prefix only 20 blocks
back from a breakpoint: when a turn (parallel tool calls and their results)
puts more blocks than that between the previous request's end and the next
breakpoint, the fourth marks that end (``wire.bridges``). Anthropic reads the
longest prefix it holds and writes the rest; usage reports both
(``cache_read_input_tokens`` becomes the cached prompt tokens,
``cache_creation_input_tokens`` the write). A call whose breakpoints are all
below the model's minimum reports neither: the service records no cache for
it and learns the floor (domain.observed). A call without a mark is sent
without breakpoints, so nothing is written.

Content is converted from the canonical (Gemini-like) shape: roles user and
model become user and assistant, functionCall and functionResponse parts
tool_use and tool_result blocks (ids are made up, pairwise, where a call
has none), inline images and PDFs base64 blocks. Thought parts are not
sent: Anthropic accepts only its own signed thinking blocks.

A prompt that fits the window while the prompt plus ``max_tokens`` does
not ("input length and `max_tokens` exceed context limit: A + B > C") is
retried once with ``max_tokens`` lowered to C - A less a small margin; with
no room for a reply it is a context overflow (the context service compacts).

SDK retries are off (the caller owns retries, but for that one); the HTTP client's request
logs are silenced. SDK exceptions are classified by the shared table
(providers.errors, read by anthropic.errors) and dropped.

Anthropic has no embedding API: the adapter is no ``ports.Embedder``, so
Embed naming it is FAILED_PRECONDITION EMBEDDINGS_NOT_SUPPORTED.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from cache_service.domain.model import ModelCall, ModelReply
from cache_service.domain.ports import CacheKind, CacheRef
from cache_service.providers.anthropic import wire
from cache_service.providers.anthropic.errors import AnthropicErrors
from cache_service.providers.anthropic.settings import LONG_TTL_S, SHORT_TTL_S, default_min_cache_tokens
from cache_service.providers.http_logs import silence_http_logs

log = logging.getLogger("agentctx.cache.anthropic")
_ERRORS = AnthropicErrors()


class AnthropicProvider:
    def __init__(
        self,
        *,
        name: str = "anthropic",
        api_key: str | None = None,
        base_url: str | None = None,
        request_timeout_s: float = 60.0,
        min_cache_tokens: int | None = None,
        default_max_tokens: int = 4096,
    ) -> None:
        silence_http_logs("anthropic")
        self.name = name
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                                timeout=request_timeout_s)
        self._min_cache_tokens = min_cache_tokens
        self._default_max_tokens = default_max_tokens

    def __repr__(self) -> str:
        return f"AnthropicProvider({self.name})"

    @property
    def cache_kind(self) -> CacheKind:
        return CacheKind.MARKED

    @property
    def named_caches(self) -> None:
        return None

    def min_cache_tokens(self, model: str) -> int:
        if self._min_cache_tokens is not None:
            return self._min_cache_tokens
        return default_min_cache_tokens(model)

    def prefix_ttl_s(self, ttl_s: float) -> float:
        return SHORT_TTL_S if ttl_s <= SHORT_TTL_S else LONG_TTL_S

    # --- model calls --------------------------------------------------------------

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        params = wire.request_params(call, cache, self._default_max_tokens)
        with _ERRORS.mapped():
            message = await self._create(params)
        return wire.reply(message)

    async def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]:
        params = wire.request_params(call, cache, self._default_max_tokens)
        with _ERRORS.mapped():
            stream = await self._create(params, stream=True)
            async with contextlib.aclosing(wire.chunks(stream, call.model)) as chunks:
                async for chunk in chunks:
                    yield chunk

    async def _create(self, params: dict[str, Any], **extra: Any) -> Any:
        """messages.create, retried once with a lower max_tokens when the
        prompt fits the window but the prompt plus max_tokens does not (the
        caller's max_tokens is a ceiling, not a demand); any other failure,
        or no room for a reply, is raised for the table."""
        try:
            return await self._client.messages.create(**params, **extra)
        except anthropic.BadRequestError as exc:
            lowered = _ERRORS.room_for_output(exc, int(params["max_tokens"]))
            if lowered is None:
                raise
        log.info("prompt plus max_tokens exceed the window; retrying once with less",
                 extra={"max_tokens": lowered})
        return await self._client.messages.create(**{**params, "max_tokens": lowered}, **extra)

    async def count_tokens(self, call: ModelCall) -> int:
        params = wire.request_params(call, None, self._default_max_tokens)
        params.pop("max_tokens", None)
        with _ERRORS.mapped():
            result = await self._client.messages.count_tokens(**params)
        return int(result.input_tokens)

    async def close(self) -> None:
        try:
            await self._client.close()
        except Exception as exc:  # noqa: BLE001 - closing is best effort
            log.info("anthropic client close failed", extra={"error_type": type(exc).__name__})
