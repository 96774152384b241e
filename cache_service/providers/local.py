"""``local``: a deterministic provider simulator for the demo, tests and
benchmarks.

- Models: any name starting with ``local-sim`` (e.g. ``local-sim-1``), each
  with a context window (default 32,768 tokens); a larger prompt raises
  ContextWindowExceeded.
- Explicit caches with create / update TTL / delete / list, named
  ``cachedContents/loc-<n>`` (secret, like a real provider's), holding a
  deep copy of their prefix, with a minimum size (default 1,024 tokens) and
  TTL expiry on an injectable clock. A request naming a cache must not carry
  a system instruction, tools or tool config, and must carry contents.
- Tokens: canonical UTF-8 bytes / 4, rounded up, like the registry's
  estimate. A cached call's prompt is the cache's tokens plus the suffix's.
- Prices: domain.pricing defaults; ``bill()`` totals what was billed. A
  deleted or expired cache leaves only its storage token-seconds, summed,
  so memory stays flat however many caches come and go.
- Replies are deterministic. If tools are declared (in the request or the
  cache) and the last content is user text naming a declared function, the
  reply calls it: id ``call-<8 hex of the request hash>``, args
  ``{"query": <that text, first 64 chars>}``. If the last content holds a
  function response, the reply is text naming the function. Otherwise the
  reply is ``local-sim reply <8 hex>`` (a hash of the model and the whole
  conversation, cached part included, so a cache never changes the
  answer). Streams send
  the same reply in up to three chunks, usage on the last.
- Test knobs: ``fail_next(op, error)``, ``fail_stream_after(n, error)``,
  ``latency_s``, ``create_gate``, ``lose_caches()``, and call counters.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentctx_common.canonical import canonical_json
from cache_service.domain.clock import SystemClock
from cache_service.domain.keys import Prefix, estimate_tokens
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
    CacheNotFound,
    CacheTooSmall,
    Clock,
    ContextWindowExceeded,
    InvalidRequest,
    ProviderError,
)
from cache_service.domain.pricing import Bill, Pricing

MODEL_PREFIX = "local-sim"
_WORD = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass
class _SimCache:
    name: ResourceName
    spec: CacheSpec
    tokens: int
    created: float
    expire: float

    def storage_token_seconds(self, until: float) -> float:
        return self.tokens * max(0.0, min(until, self.expire) - self.created)


class LocalProvider:
    name = "local"

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        min_cache_tokens: int = 1024,
        context_window: int = 32_768,
        bytes_per_token: float = 4.0,
        pricing: Pricing = Pricing(),
    ) -> None:
        self.clock = clock or SystemClock()
        self._min_cache_tokens = min_cache_tokens
        self.context_window = context_window
        self.bytes_per_token = bytes_per_token
        self.pricing = pricing
        self.latency_s = 0.0
        self.create_gate: asyncio.Event | None = None
        self.counts = {"create": 0, "update": 0, "delete": 0, "list": 0, "generate": 0, "stream": 0}
        self._caches: dict[ResourceName, _SimCache] = {}
        self._gone_token_seconds = 0.0  # storage of the caches no longer held
        self._ids = itertools.count(1)
        self._failures: dict[str, list[ProviderError]] = {}
        self._stream_failure: tuple[int, ProviderError] | None = None
        self._bill = Bill()

    # --- knobs and views ------------------------------------------------------

    def fail_next(self, op: str, error: ProviderError, times: int = 1) -> None:
        """The next ``times`` calls of ``op`` (create, update, delete, list,
        generate, stream) raise ``error``."""
        self._failures.setdefault(op, []).extend([error] * times)

    def fail_stream_after(self, chunks: int, error: ProviderError) -> None:
        """The next stream sends ``chunks`` chunks, then raises ``error``."""
        self._stream_failure = (chunks, error)

    def lose_caches(self) -> None:
        """Forget every cache, as a provider does at an expiry we missed."""
        now = self.clock.wall()
        for cache in self._caches.values():
            self._gone_token_seconds += cache.storage_token_seconds(now)
        self._caches.clear()

    def live_names(self) -> set[ResourceName]:
        now = self.clock.wall()
        return {n for n, c in self._caches.items() if c.expire > now}

    def cached_prefix(self, name: ResourceName) -> CacheSpec:
        return self._caches[name].spec

    def bill(self) -> Bill:
        """What has been billed so far, storage up to now included."""
        now = self.clock.wall()
        live = sum(c.storage_token_seconds(now) for c in self._caches.values())
        storage = (live + self._gone_token_seconds) / 3600.0
        return Bill(**{**self._bill.__dict__, "storage_token_hours": storage})

    # --- Provider -------------------------------------------------------------

    def min_cache_tokens(self, model: str) -> int:
        return self._min_cache_tokens

    async def create_cache(self, spec: CacheSpec) -> CacheHandle:
        await self._enter("create")
        if self.create_gate is not None:
            await self.create_gate.wait()
        self._check_model(spec.model)
        prefix = Prefix(spec.model, spec.system_instruction, spec.tools, spec.tool_config, spec.contents)
        tokens = self._tokens(prefix.json())
        if tokens < self._min_cache_tokens:
            raise CacheTooSmall(min_tokens=self._min_cache_tokens, status=400)
        now = self.clock.wall()
        name = ResourceName(f"cachedContents/loc-{next(self._ids)}")
        # A deep copy: nothing the caller holds can change what is cached.
        self._caches[name] = _SimCache(name, copy.deepcopy(spec), tokens, now, now + spec.ttl_s)
        self._bill.cache_write_tokens += tokens
        return CacheHandle(name, now + spec.ttl_s, tokens)

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle:
        await self._enter("update")
        cache = self._live(name)
        cache.expire = self.clock.wall() + ttl_s
        return CacheHandle(name, cache.expire, cache.tokens)

    async def delete_cache(self, name: ResourceName) -> None:
        await self._enter("delete")
        cache = self._live(name)
        del self._caches[name]
        self._gone_token_seconds += cache.storage_token_seconds(self.clock.wall())

    async def list_caches(self) -> list[ListedCache]:
        await self._enter("list")
        now = self.clock.wall()
        return [ListedCache(c.name, c.spec.display_name, c.expire) for c in self._caches.values() if c.expire > now]

    async def count_tokens(self, call: ModelCall) -> int:
        return self._tokens(Prefix.of_call(call, len(call.contents)).json())

    async def generate(self, call: ModelCall, cached: ResourceName | None) -> ModelReply:
        await self._enter("generate")
        content, usage = self._answer(call, cached)
        return ModelReply(content=content, finish_reason="STOP", usage=usage, model_version=call.model)

    async def stream_generate(self, call: ModelCall, cached: ResourceName | None) -> AsyncIterator[ModelReply]:
        await self._enter("stream")
        content, usage = self._answer(call, cached)
        parts = content["parts"]
        if "text" in parts[0]:
            words = parts[0]["text"].split(" ")
            thirds = max(1, -(-len(words) // 3))
            pieces = [" ".join(words[i:i + thirds]) for i in range(0, len(words), thirds)]
            pieces = [p + (" " if i < len(pieces) - 1 else "") for i, p in enumerate(pieces)]
            chunks = [{"role": "model", "parts": [{"text": p}]} for p in pieces]
        else:
            chunks = [content]
        failure, self._stream_failure = self._stream_failure, None
        for i, chunk in enumerate(chunks):
            if failure is not None and i == failure[0]:
                raise failure[1]
            last = i == len(chunks) - 1
            if self.latency_s:
                await asyncio.sleep(self.latency_s / 10)
            yield ModelReply(content=chunk, finish_reason="STOP" if last else "", usage=usage if last else None,
                             model_version=call.model)

    async def close(self) -> None:
        return None

    # --- internals --------------------------------------------------------------

    async def _enter(self, op: str) -> None:
        self.counts[op] += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        queue = self._failures.get(op)
        if queue:
            raise queue.pop(0)

    def _tokens(self, value: object) -> int:
        return estimate_tokens(len(canonical_json(value)), self.bytes_per_token)

    def _check_model(self, model: str) -> None:
        if not model.startswith(MODEL_PREFIX):
            raise InvalidRequest("the local simulator serves local-sim-* models only", status=400)

    def _live(self, name: ResourceName) -> _SimCache:
        cache = self._caches.get(name)
        if cache is not None and cache.expire <= self.clock.wall():
            # Expired: gone, as on a real provider.
            del self._caches[name]
            self._gone_token_seconds += cache.storage_token_seconds(cache.expire)
            cache = None
        if cache is None:
            raise CacheNotFound(status=404)
        return cache

    def _answer(self, call: ModelCall, cached: ResourceName | None) -> tuple[JSON, Usage]:
        self._check_model(call.model)
        if not call.contents:
            raise InvalidRequest("contents must not be empty", status=400)
        cached_tokens = 0
        tools = call.tools
        history = call.contents
        if cached is not None:
            if call.system_instruction is not None or call.tools or call.tool_config is not None:
                raise InvalidRequest("a request naming a cache must not set system instruction, tools or tool config",
                                     status=400)
            cache = self._live(cached)
            cached_tokens = cache.tokens
            tools = cache.spec.tools
            history = (*cache.spec.contents, *call.contents)
            prompt = cached_tokens + self._tokens(list(call.contents))
        else:
            prompt = self._tokens(Prefix.of_call(call, len(call.contents)).json())
        if prompt > self.context_window:
            raise ContextWindowExceeded(prompt_tokens=prompt, context_window=self.context_window, status=400)
        content = _reply(call.model, history, tools)
        output = self._tokens(content)
        self._bill.calls += 1
        self._bill.input_tokens += prompt - cached_tokens
        self._bill.cached_tokens += cached_tokens
        self._bill.output_tokens += output
        return content, Usage(prompt_tokens=prompt, cached_prompt_tokens=cached_tokens, output_tokens=output,
                              total_tokens=prompt + output)


def _reply(model: str, history: tuple[JSON, ...], tools: tuple[JSON, ...]) -> JSON:
    # Over the whole conversation, cached part included: a cache never
    # changes the answer.
    digest = hashlib.sha256(canonical_json([model, list(history)])).hexdigest()
    last = history[-1]
    for part in last.get("parts", ()):
        if "functionResponse" in part:
            name = part["functionResponse"].get("name", "")
            return {"role": "model", "parts": [{"text": f"local-sim used the result of {name}"}]}
    declared = {f.get("name") for t in tools for f in t.get("functionDeclarations", ())}
    if last.get("role") == "user" and declared:
        for part in last.get("parts", ()):
            text = part.get("text")
            if not text:
                continue
            for word in _WORD.findall(text):
                if word in declared:
                    call_part = {"id": f"call-{digest[:8]}", "name": word, "args": {"query": text[:64]}}
                    return {"role": "model", "parts": [{"functionCall": call_part}]}
    return {"role": "model", "parts": [{"text": f"local-sim reply {digest[:8]}"}]}
