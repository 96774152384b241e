"""``local`` with shared state: the simulator's caches in Redis, so that in
cluster mode every cache replica talks to the same "provider", as replicas
of a real deployment all reach the same Gemini project. A cache created
through replica A is listed, used, refreshed and deleted through replica B.

The state lives under its own prefix (``local_state_prefix``), apart from
the cache service's keys: it stands for the provider's own servers, which
hold resource names in clear as any provider does. ``stats`` counts the
provider calls of every replica (the cluster benchmark reads it).

Everything else (tokens, replies, limits, knobs) is LocalProvider's; a
model call first loads the cache it names from Redis.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

from cache_service.cluster.client import RedisClient
from cache_service.cluster.codec import text
from cache_service.domain.keys import Prefix
from cache_service.domain.model import CacheHandle, CacheSpec, ListedCache, ModelCall, ModelReply, ResourceName
from cache_service.domain.ports import CacheNotFound, CacheTooSmall, PrefixMark
from cache_service.providers.local.adapter import LocalProvider, _SimCache


class SharedLocalProvider(LocalProvider):
    def __init__(self, client: RedisClient, prefix: str, *, owns_client: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._r = client
        self._owns_client = owns_client
        self._key = f"{prefix}caches"
        self._stats = f"{prefix}stats"

    async def close(self) -> None:
        if self._owns_client:
            await self._r.aclose()

    async def create_cache(self, spec: CacheSpec) -> CacheHandle:
        await self._enter("create")
        if self.create_gate is not None:
            await self.create_gate.wait()
        self._check_model(spec.model)
        tokens = self._tokens(Prefix(spec.model, spec.system_instruction, spec.tools, spec.tool_config,
                                     spec.contents).json())
        if tokens < self._min_cache_tokens:
            raise CacheTooSmall(min_tokens=self._min_cache_tokens, status=400)
        now = self.clock.wall()
        name = ResourceName(f"cachedContents/loc-{secrets.token_hex(8)}")
        row = {"spec": _spec_json(spec), "tokens": tokens, "created": now, "expire": now + spec.ttl_s}
        async with self._r.pipeline(transaction=False) as pipe:  # two keys: two slots of a cluster
            pipe.hset(self._key, name.reveal(), json.dumps(row))
            pipe.hincrby(self._stats, "create", 1)
            await pipe.execute()
        self._bill.cache_write_tokens += tokens
        return CacheHandle(name, now + spec.ttl_s, tokens)

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle:
        await self._enter("update")
        cache = await self._load(name)
        cache.expire = self.clock.wall() + ttl_s
        await self._r.hset(self._key, name.reveal(), json.dumps(_row(cache)))
        return CacheHandle(name, cache.expire, cache.tokens)

    async def delete_cache(self, name: ResourceName) -> None:
        await self._enter("delete")
        await self._load(name)
        if not await self._r.hdel(self._key, name.reveal()):
            raise CacheNotFound(status=404)
        await self._r.hincrby(self._stats, "delete", 1)

    async def list_caches(self) -> list[ListedCache]:
        await self._enter("list")
        now = self.clock.wall()
        listed = []
        for raw_name, raw in (await self._r.hgetall(self._key)).items():
            row = json.loads(raw)
            if row["expire"] > now:
                listed.append(ListedCache(ResourceName(text(raw_name)), row["spec"]["display_name"], row["expire"]))
        return listed

    async def live_names_shared(self) -> set[str]:
        return {c.name.reveal() for c in await self.list_caches()}

    async def generate(self, call: ModelCall, cache: ResourceName | PrefixMark | None) -> ModelReply:
        await self._pull(cache if isinstance(cache, ResourceName) else None)
        return await super().generate(call, cache)

    async def stream_generate(self, call: ModelCall, cache: ResourceName | PrefixMark | None) -> AsyncIterator[ModelReply]:
        await self._pull(cache if isinstance(cache, ResourceName) else None)
        async for chunk in super().stream_generate(call, cache):
            yield chunk

    async def stats(self) -> dict[str, int]:
        return {text(k): int(v) for k, v in (await self._r.hgetall(self._stats)).items()}

    async def _pull(self, name: ResourceName | None) -> None:
        """This process's copy of the named cache, for LocalProvider's call path."""
        if name is None:
            return
        self._caches.pop(name, None)
        try:
            self._caches[name] = await self._load(name)
        except CacheNotFound:
            pass  # the call path raises it

    async def _load(self, name: ResourceName) -> _SimCache:
        raw = await self._r.hget(self._key, name.reveal())
        if raw is None:
            raise CacheNotFound(status=404)
        row = json.loads(raw)
        if row["expire"] <= self.clock.wall():
            await self._r.hdel(self._key, name.reveal())
            raise CacheNotFound(status=404)
        s = row["spec"]
        spec = CacheSpec(s["model"], s["system_instruction"], tuple(s["tools"]), s["tool_config"],
                         tuple(s["contents"]), s["ttl_s"], s["display_name"])
        return _SimCache(name, spec, row["tokens"], row["created"], row["expire"])


def _spec_json(spec: CacheSpec) -> dict[str, Any]:
    return {"model": spec.model, "system_instruction": spec.system_instruction, "tools": list(spec.tools),
            "tool_config": spec.tool_config, "contents": list(spec.contents), "ttl_s": spec.ttl_s,
            "display_name": spec.display_name}


def _row(cache: _SimCache) -> dict[str, Any]:
    return {"spec": _spec_json(cache.spec), "tokens": cache.tokens, "created": cache.created, "expire": cache.expire}
