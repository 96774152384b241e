"""``local``: a deterministic provider simulator for the demo, tests and
benchmarks, in one of the three cache kinds (``kind``), each with its price
shape (domain.pricing):

- ``local`` (NAMED, Gemini-like): explicit caches, described below.
- ``local-anthropic`` (MARKED, Anthropic-like): a call's PrefixMark puts
  breakpoints after the system instruction and tools and after the leased
  prefix. At each breakpoint the longest prefix already written, ending at
  most ``LOOKBACK`` contents before it, is read, and the rest up to the
  breakpoint is written (if the breakpoint's prefix reaches the minimum
  size), for 5 minutes, or an hour when the TTL asked exceeds 5 minutes.
  A read extends the prefix's TTL. Usage reports writes and reads.
- ``local-openai`` (AUTOMATIC, OpenAI-like): every call of at least the
  minimum size is cached, at every content boundary, on one of
  ``machines`` machines for 5 minutes past its last use; a call reads the
  longest prefix cached on the machine it lands on. A call lands by its
  routing key (``prompt_cache_key``) and head; a route with more than
  ``overflow_rpm`` calls in the last minute spreads them over the next
  machines (each call by its own hash), as OpenAI's router does. Writes
  are free.

Behaviour common to all kinds:

- Models: any name starting with ``local-sim`` (e.g. ``local-sim-1``), each
  with a context window (default 32,768 tokens); a larger prompt raises
  ContextWindowExceeded.
- Explicit caches (NAMED only) with create / update TTL / delete / list, named
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
- Embeddings (any ``local-sim*`` model, e.g. ``local-sim-embed``):
  deterministic hashed features, L2-normalized, 256 dimensions unless the
  call asks for others. Each word (lower-cased, stop words left out unless
  nothing else is left) adds its own feature, its first five letters (a
  crude stem: "allergic" and "allergy" share one) and its character
  trigrams, each signed and hashed into the vector, so texts that share
  words or word stems score a higher cosine than texts that do not. Not a
  language model: paraphrases that share no word stay unrelated. At most
  ``MAX_EMBED_TEXTS`` texts a call; an empty text is refused as a real
  provider refuses it.
- Test knobs: ``fail_next(op, error)``, ``fail_stream_after(n, error)``,
  ``latency_s``, ``create_gate``, ``lose_caches()``, and call counters.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import hashlib
import itertools
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from agentctx_common.canonical import canonical_json
from cache_service.domain.clock import SystemClock
from cache_service.domain.keys import Prefix, canonical_list, canonical_size, chain_digests, estimate_tokens
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
    Clock,
    ContextWindowExceeded,
    EmbedCall,
    Embeddings,
    InvalidRequest,
    PrefixMark,
    ProviderError,
)
from cache_service.domain.pricing import ANTHROPIC, GEMINI, OPENAI, Bill, Pricing

MODEL_PREFIX = "local-sim"
LOOKBACK = 20  # contents a breakpoint looks back for a written prefix
SHORT_TTL_S = 300.0
LONG_TTL_S = 3600.0
# Provider name -> (cache kind, price shape, model prefix its route takes).
SHAPES: dict[str, tuple[CacheKind, Pricing, str]] = {
    "local-anthropic": (CacheKind.MARKED, ANTHROPIC, "local-sim-anthropic"),
    "local-openai": (CacheKind.AUTOMATIC, OPENAI, "local-sim-openai"),
    "local": (CacheKind.NAMED, GEMINI, "local-sim"),
}
_WORD = re.compile(r"[A-Za-z0-9_.\-]+")
MAX_EMBED_TEXTS = 256
EMBED_DIMENSIONS = 256
_EMBED_WORD = re.compile(r"\w+", re.UNICODE)
_EMBED_STOP = frozenset(
    "a an and are as at be but by did do does for from had has have how i in is it its me my of on or our "
    "she so that the their them then there these they this to was we were what when where which who whom "
    "why will with you your".split()
)


@dataclass(frozen=True)
class _Read:
    cached: int  # tokens read
    written: int  # tokens written
    long_written: int  # of those, for the long TTL


@dataclass
class _SimCache:
    name: ResourceName
    spec: CacheSpec
    tokens: int
    created: float
    expire: float
    # canonical_json(list(spec.contents)), measured once: every reply's
    # digest covers the cached contents.
    contents_json: bytes = b"[]"

    def storage_token_seconds(self, until: float) -> float:
        return self.tokens * max(0.0, min(until, self.expire) - self.created)


class LocalProvider:
    def __init__(
        self,
        *,
        clock: Clock | None = None,
        min_cache_tokens: int = 1024,
        context_window: int = 32_768,
        bytes_per_token: float = 4.0,
        pricing: Pricing | None = None,
        name: str = "local",
        kind: CacheKind | None = None,
        machines: int = 4,
        overflow_rpm: int = 15,
    ) -> None:
        shape = SHAPES.get(name, SHAPES["local"])
        self.name = name
        self.kind = kind or shape[0]
        self.pricing = pricing or shape[1]
        self.machines = machines
        self.overflow_rpm = overflow_rpm
        # MARKED: chain digest -> (expiry, long TTL); AUTOMATIC: one map per machine.
        self._written: dict[bytes, tuple[float, bool]] = {}
        self._machines: list[dict[bytes, float]] = [{} for _ in range(machines)]
        self._routes: dict[bytes, collections.deque[float]] = {}
        self.clock = clock or SystemClock()
        self._min_cache_tokens = min_cache_tokens
        self.context_window = context_window
        self.bytes_per_token = bytes_per_token
        self.latency_s = 0.0
        self.caching = True  # AUTOMATIC: False serves as a server without prefix caching
        self.create_gate: asyncio.Event | None = None
        self.counts = {"create": 0, "update": 0, "delete": 0, "list": 0, "generate": 0, "stream": 0, "embed": 0}
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

    def __repr__(self) -> str:
        return f"LocalProvider({self.name})"

    @property
    def cache_kind(self) -> CacheKind:
        return self.kind

    @property
    def named_caches(self) -> LocalProvider | None:
        return self if self.kind is CacheKind.NAMED else None

    def min_cache_tokens(self, model: str) -> int:
        return self._min_cache_tokens

    def prefix_ttl_s(self, ttl_s: float) -> float:
        if self.kind is CacheKind.MARKED:
            return SHORT_TTL_S if ttl_s <= SHORT_TTL_S else LONG_TTL_S
        if self.kind is CacheKind.AUTOMATIC:
            return SHORT_TTL_S
        return ttl_s

    async def create_cache(self, spec: CacheSpec) -> CacheHandle:
        await self._enter("create")
        self._named_only()
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
        kept = copy.deepcopy(spec)
        self._caches[name] = _SimCache(name, kept, tokens, now, now + spec.ttl_s, canonical_list(kept.contents))
        self._bill.cache_write_tokens += tokens
        return CacheHandle(name, now + spec.ttl_s, tokens)

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle:
        await self._enter("update")
        self._named_only()
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
        return self._prefix_tokens(call, len(call.contents))

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        await self._enter("generate")
        content, usage = self._answer(call, cache)
        return ModelReply(content=content, finish_reason="STOP", usage=usage, model_version=call.model)

    async def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]:
        await self._enter("stream")
        content, usage = self._answer(call, cache)
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

    @property
    def max_embed_texts(self) -> int:
        return MAX_EMBED_TEXTS

    async def embed(self, call: EmbedCall) -> Embeddings:
        await self._enter("embed")
        if not call.model.startswith(MODEL_PREFIX):
            raise InvalidRequest("the local simulator serves local-sim-* models only", status=404)
        if not call.texts or len(call.texts) > MAX_EMBED_TEXTS or not all(t.strip() for t in call.texts):
            raise InvalidRequest("texts must be 1 to 256 non-empty strings", status=400)
        dims = call.dimensions or EMBED_DIMENSIONS
        vectors = tuple(embed_text(t, dims) for t in call.texts)
        return Embeddings(vectors, sum(self._tokens(t) for t in call.texts))

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

    def _named_only(self) -> None:
        if self.kind is not CacheKind.NAMED:
            raise InvalidRequest("this simulator has no named caches", status=404)

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

    def _answer(self, call: ModelCall, cache: CacheRef | None) -> tuple[JSON, Usage]:
        self._check_model(call.model)
        if not call.contents:
            raise InvalidRequest("contents must not be empty", status=400)
        cached_tokens = written = long_written = 0
        tools = call.tools
        history = call.contents
        history_json = canonical_list(call.contents)
        if isinstance(cache, ResourceName):
            if self.kind is not CacheKind.NAMED:
                raise InvalidRequest("this simulator has no named caches", status=400)
            if call.system_instruction is not None or call.tools or call.tool_config is not None:
                raise InvalidRequest("a request naming a cache must not set system instruction, tools or tool config",
                                     status=400)
            named = self._live(cache)
            cached_tokens = named.tokens
            tools = named.spec.tools
            history = (*named.spec.contents, *call.contents)
            prompt = cached_tokens + estimate_tokens(len(history_json), self.bytes_per_token)
            history_json = _joined(named.contents_json, history_json)
        else:
            prompt = self._prefix_tokens(call, len(call.contents))
        if prompt > self.context_window:
            raise ContextWindowExceeded(prompt_tokens=prompt, context_window=self.context_window, status=400)
        marks = self.marks(call, cache)
        if self.kind is CacheKind.MARKED and marks:
            read = self._marked(call, marks, cache.ttl_s if isinstance(cache, PrefixMark) else SHORT_TTL_S)
            cached_tokens, written, long_written = read.cached, read.written, read.long_written
        elif self.kind is CacheKind.AUTOMATIC and self.caching:
            cached_tokens = self._automatic(call, self.routing_key(cache), prompt)
        content = _reply(call.model, history, tools, history_json)
        output = self._tokens(content)
        self._bill.calls += 1
        self._bill.input_tokens += prompt - cached_tokens - written
        self._bill.cached_tokens += cached_tokens
        self._bill.cache_write_tokens += written
        self._bill.cache_write_long_tokens += long_written
        self._bill.output_tokens += output
        return content, Usage(prompt_tokens=prompt, cached_prompt_tokens=cached_tokens, output_tokens=output,
                              total_tokens=prompt + output, cache_write_tokens=written)

    # --- marked and automatic prefixes ------------------------------------------------

    def marks(self, call: ModelCall, cache: CacheRef | None) -> tuple[int, ...]:
        """Where a MARKED call has breakpoints, in contents (0: after the
        head), as the adapter places them (a seam for benchmarks' naive
        clients)."""
        if not isinstance(cache, PrefixMark) or cache.history_len is None:
            return ()
        return (0, cache.history_len, len(call.contents)) if cache.write_through else (0, cache.history_len)

    def routing_key(self, cache: CacheRef | None) -> str:
        """The prompt_cache_key an AUTOMATIC call carries (a seam likewise)."""
        return cache.key if isinstance(cache, PrefixMark) else ""

    def _prefix_tokens(self, call: ModelCall, upto: int) -> int:
        # As _tokens(prefix.json()), from the contents' measured bytes.
        return estimate_tokens(canonical_size(Prefix.of_call(call, upto)), self.bytes_per_token)

    def _marked(self, call: ModelCall, marks: Sequence[int], ttl_s: float) -> _Read:
        """Breakpoints after ``marks`` contents (0: after the head): read the
        longest written prefix within the lookback, write the rest."""
        now = self.clock.wall()
        head = Prefix.of_call(call, 0)
        chain = chain_digests(head.head_json(), call.contents)
        long = ttl_s > SHORT_TTL_S
        expire = now + (LONG_TTL_S if long else SHORT_TTL_S)
        read_at = 0
        read_tokens = written = 0
        covered = 0  # tokens read or written by earlier breakpoints of this call
        before = dict(self._written)  # what earlier calls wrote
        for mark in sorted({m for m in marks if 0 <= m <= len(call.contents)})[:4]:
            hit = None
            for pos in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                record = before.get(chain[pos])
                if record is not None and record[0] > now:
                    hit = pos
                    break
            base = 0
            if hit is not None:
                tokens = self._prefix_tokens(call, hit)
                base = tokens
                if hit >= read_at and tokens > read_tokens:
                    read_at, read_tokens = hit, tokens
                    held = self._written[chain[hit]]
                    self._written[chain[hit]] = (max(held[0], now + (LONG_TTL_S if held[1] else SHORT_TTL_S)), held[1])
            size = self._prefix_tokens(call, mark)
            if size >= self._min_cache_tokens and (hit is None or hit < mark):
                start = max(base, covered)
                written += max(0, size - start)
                self._written[chain[mark]] = (expire, long)
            covered = max(covered, size if size >= self._min_cache_tokens else base)
        self._forget_expired_marks(now)
        return _Read(read_tokens, written, written if long else 0)

    def _forget_expired_marks(self, now: float) -> None:
        if len(self._written) > 4096:
            self._written = {k: v for k, v in self._written.items() if v[0] > now}

    def _automatic(self, call: ModelCall, key: str, prompt: int) -> int:
        """Lands the call on a machine, reads the longest prefix cached there,
        and caches the call's prefixes there."""
        if prompt < self._min_cache_tokens:
            return 0
        now = self.clock.wall()
        head = Prefix.of_call(call, 0)
        chain = chain_digests(head.head_json(), call.contents)
        route = hashlib.sha256(key.encode() + b"\0" + chain[0]).digest()
        recent = self._routes.setdefault(route, collections.deque())
        while recent and recent[0] <= now - 60.0:
            recent.popleft()
        spill = len(recent) // self.overflow_rpm
        recent.append(now)
        # Over its rate a route spreads over more machines, each call to one
        # of them by its own hash: its prefix is cached on only one of those.
        spread = int.from_bytes(hashlib.sha256(chain[-1]).digest()[:4], "big") % (spill + 1)
        machine = self._machines[(int.from_bytes(route[:4], "big") + spread) % self.machines]
        cached = 0
        for pos in range(len(call.contents), -1, -1):
            expire = machine.get(chain[pos])
            if expire is not None and expire > now:
                tokens = self._prefix_tokens(call, pos)
                cached = tokens if tokens >= self._min_cache_tokens else 0
                break
        for pos in range(len(call.contents) + 1):
            machine[chain[pos]] = now + SHORT_TTL_S
        if len(machine) > 8192:
            for digest in [d for d, e in machine.items() if e <= now]:
                del machine[digest]
        return cached


def _joined(first: bytes, then: bytes) -> bytes:
    """Two canonical JSON lists as one."""
    if first == b"[]":
        return then
    return first if then == b"[]" else first[:-1] + b"," + then[1:]


def _reply(model: str, history: tuple[JSON, ...], tools: tuple[JSON, ...], history_json: bytes) -> JSON:
    """``history_json``: ``canonical_list(history)``."""
    # Over the whole conversation, cached part included: a cache never
    # changes the answer. The digest is of canonical_json([model, list(history)]).
    digest = hashlib.sha256(b"[" + canonical_json(model) + b"," + history_json + b"]").hexdigest()
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


def embed_text(text: str, dims: int = EMBED_DIMENSIONS) -> tuple[float, ...]:
    """The simulator's embedding of ``text`` (see the module docstring)."""
    words = [w.lower() for w in _EMBED_WORD.findall(text)]
    kept = [w for w in words if w not in _EMBED_STOP] or words
    vector = [0.0] * dims
    for word in kept:
        features = [(word, 1.0)]
        if len(word) > 5:
            features.append(("stem:" + word[:5], 1.0))
        padded = f"<{word}>"
        grams = [padded[i:i + 3] for i in range(len(padded) - 2)]
        features += [("tri:" + g, 0.5 / max(1, len(grams)) ** 0.5) for g in grams]
        for feature, weight in features:
            h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
            vector[h % dims] += weight if (h >> 63) & 1 else -weight
    norm = sum(x * x for x in vector) ** 0.5
    return tuple(x / norm for x in vector) if norm else tuple(vector)
