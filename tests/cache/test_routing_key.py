"""The routing key (OpenAI's ``prompt_cache_key``): an HMAC of the app and
the request's head under a secret the cache tier holds, so users of one
agent route together while a guessed app, head or ``scope_fingerprint``
does not give the key; one configured secret gives every replica the same
key."""

from __future__ import annotations

import base64
import hashlib
import pathlib
import time
from collections.abc import Callable
from typing import Any

from cache_service.app import routing_keys
from cache_service.domain.capabilities import RoutingKeys
from cache_service.domain.clock import ManualClock
from cache_service.domain.generation import Generator
from cache_service.domain.model import ModelCall
from cache_service.domain.policy import PolicySettings
from cache_service.providers.openai.adapter import OpenAIProvider
from tests.cache.support import SYSTEM, scope
from tests.fakes.openai_server import FakeOpenAI
from tests.support.servers import cache_settings

MODEL = "gpt-5-mini"


def _unkeyed(fp: str) -> str:
    # What anyone holding a scope fingerprint could compute before.
    return hashlib.sha256(b"agentctx-prompt-cache-key\0" + fp.encode()).hexdigest()[:32]


async def test_the_key_on_the_wire_is_keyed_by_the_tiers_secret(harness_factory: Callable[..., Any]) -> None:
    s = scope(model=MODEL, provider="openai")
    call = ModelCall(MODEL, ({"role": "user", "parts": [{"text": "hello " * 40}]},), SYSTEM, (), None, {})
    with FakeOpenAI(min_cache_tokens=64) as fake:
        provider = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1")
        try:
            h = await harness_factory(provider=provider, live=lambda: set(),
                                      harness_clock=ManualClock(start_wall=time.time()),
                                      policy=PolicySettings(min_prefix_tokens=64, sightings_before_create=0))
            for keys in (RoutingKeys(b"a" * 32), RoutingKeys(b"a" * 32), RoutingKeys(b"b" * 32), RoutingKeys()):
                await Generator(h.registry, routing_keys=keys).generate(s, call, "")
        finally:
            await provider.close()
    sent = [c.body["prompt_cache_key"] for c in fake.calls_of("generate")]
    assert sent[0] == sent[1] == RoutingKeys(b"a" * 32).of(s.app, call)
    assert len(set(sent)) == 3 and _unkeyed(s.fingerprint) not in sent and s.fingerprint not in sent


def test_one_agents_users_share_a_key_that_names_none_of_them() -> None:
    keys = RoutingKeys(b"a" * 32)
    alice = ModelCall(MODEL, ({"role": "user", "parts": [{"text": "alice's question"}]},), SYSTEM, (), None, {})
    bob = ModelCall(MODEL, ({"role": "user", "parts": [{"text": "bob asks another"}]},), SYSTEM, (), None, {})
    other_agent = ModelCall(MODEL, alice.contents, {"parts": [{"text": "another system"}]}, (), None, {})
    assert keys.of("shop", alice) == keys.of("shop", bob)
    assert len({keys.of("shop", alice), keys.of("shop", other_agent), keys.of("blog", alice)}) == 3
    for who in ("alice", "bob", "shop"):
        assert who not in keys.of("shop", alice)


def test_the_secret_comes_from_configured_key_material(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    fp = "shop"
    call = ModelCall(MODEL, ({"role": "user", "parts": [{"text": "hi"}]},), SYSTEM, (), None, {})
    encryption = base64.b64encode(b"k" * 32).decode()
    lease = [{"id": "k1", "secret": "s" * 32}]
    by_encryption = [routing_keys(cache_settings(certs_dir, tmp_path, redis_encryption_key=encryption))
                     for _ in range(2)]
    by_lease = [routing_keys(cache_settings(certs_dir, tmp_path, lease_keys=lease, active_lease_key_id="k1"))
                for _ in range(2)]
    alone = [routing_keys(cache_settings(certs_dir, tmp_path)) for _ in range(2)]
    assert not any(k.per_process for k in by_encryption + by_lease) and all(k.per_process for k in alone)
    # Two replicas (or a restart) with the same configuration route alike.
    assert by_encryption[0].of(fp, call) == by_encryption[1].of(fp, call) != by_lease[0].of(fp, call) == by_lease[1].of(fp, call)
    assert alone[0].of(fp, call) != alone[1].of(fp, call)
    # The material itself is never the key.
    assert by_lease[0].of(fp, call) != RoutingKeys(b"s" * 32).of(fp, call)
