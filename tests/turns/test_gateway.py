"""The model-call leg against the real cache service: a lease the cache
service refuses at call time (here: its scope was invalidated in between)
is a cache failure, and the call goes ahead uncached."""

from __future__ import annotations

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2
from context_service.building.builder import ContextBuilder
from context_service.building.history import HistoryCache
from context_service.building.types import BuiltContext
from context_service.cache_client import CacheClient
from context_service.domain import turns
from context_service.domain.config import CachePolicy, ContextConfig
from context_service.domain.model import CacheState, Event, SessionKey
from context_service.domain.sessions import Limits, SessionHead
from context_service.mapping.build_context import RequestMapper, model_request
from context_service.mapping.cache_calls import cache_prefix, scope_to_proto
from context_service.mapping.wire import render
from context_service.turns.gateway import ModelGateway, cache_scope
from tests.support.servers import context_settings
from tests.turns.builders import MODEL, SYSTEM, TOOLS

KEY = SessionKey("app", "user-1", "s1")
POLICY = CachePolicy(enabled=True, scope_policy={"context_version": 2})


class _NoEvents:
    """A session with nothing stored: the history cache never reads it."""

    async def list_events(self, key: SessionKey, **_: object) -> list[Event]:
        return []

    async def get(self, key: SessionKey) -> SessionHead:
        return SessionHead(key, "i", 0, ContextConfig())

    async def close(self) -> None:
        pass


async def _request(turn_count: int) -> BuiltContext:
    """A built context of ``turn_count`` exchanges (sent as memory) and one input."""
    contents = []
    for i in range(turn_count):
        contents.append(content_pb2.Content(role="user", parts=[content_pb2.Part(text=f"question {i} " * 20)]))
        contents.append(content_pb2.Content(role="model", parts=[content_pb2.Part(text=f"answer {i} " * 20)]))
    request = pb.BuildContextRequest(
        model=MODEL, system_instruction=SYSTEM, tools=TOOLS, memory=contents,
        input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="and now?")])],
    )
    source = _NoEvents()
    builder = ContextBuilder(
        heads=source, history=HistoryCache(source, render), render=render, limits=Limits(),
        effective_config=lambda c: c,
    )
    return await builder.build(SessionHead(KEY, "i", 0, ContextConfig()), RequestMapper().build_request(request))


@pytest.fixture
async def gateway(pair, certs_dir, tmp_path):
    client = CacheClient(context_settings(certs_dir, tmp_path, cache_target=f"127.0.0.1:{pair.cache_port}"))
    yield ModelGateway(client), client
    await client.close()


async def test_prefix_is_everything_before_the_input() -> None:
    built = await _request(2)
    request = model_request(built)
    assert request.model == MODEL and len(request.contents) == 5
    prefix = cache_prefix(built, 1)
    assert list(prefix.history) == list(request.contents[:-1])
    assert prefix.system_instruction == SYSTEM and list(prefix.tools) == list(TOOLS)
    assert not prefix.HasField("tool_config")
    scope = scope_to_proto(cache_scope(KEY, MODEL, POLICY))
    assert (scope.app, scope.user, scope.model, scope.provider) == ("app", "user-1", MODEL, "")
    assert dict(scope.policy) == {"context_version": 2}


async def test_a_refused_lease_is_sent_uncached(pair, gateway) -> None:
    gw, client = gateway
    deadline = turns.Deadline(10.0)
    scope = cache_scope(KEY, MODEL, POLICY)
    built = await _request(3)
    first = await gw.acquire(scope, built, 1, POLICY, deadline)
    assert first.token == "" and first.info.bypass_reason == "FIRST_SIGHTING"
    lease = await gw.acquire(scope, built, 1, POLICY, deadline)
    assert lease.token and lease.info.state is CacheState.CREATED

    await client.invalidate_scope(scope)
    calls = pair.provider.counts["generate"]
    answer = await gw.generate(scope, built, lease, deadline)
    assert answer.content.parts and answer.usage is not None and answer.usage.cached_prompt_tokens == 0
    assert (answer.cache.state, answer.cache.bypass_reason) == (CacheState.BYPASS, "INVALIDATED")
    assert answer.cache.prefix_fingerprint == lease.info.prefix_fingerprint
    assert pair.provider.counts["generate"] == calls + 1, "one provider call: the refusal costs nothing"

    # The same for a stream; a released lease is then refused too.
    await gw.release(lease, deadline)
    items = [item async for item in gw.stream(scope, built, lease, deadline)]
    final = items[-1]
    assert isinstance(final, turns.ModelAnswer) and final.cache.state is CacheState.BYPASS
    assert final.content == turns.merge_chunks(items[:-1])


async def test_caching_off_sends_no_lease_and_records_disabled(pair, gateway) -> None:
    gw, _ = gateway
    off = CachePolicy(enabled=False)
    scope = cache_scope(KEY, MODEL, off)
    built = await _request(3)
    lease = await gw.acquire(scope, built, 1, off, turns.Deadline(10.0))
    assert lease.token == "" and not lease.enabled
    answer = await gw.generate(scope, built, lease, turns.Deadline(10.0))
    assert (answer.cache.state, answer.cache.bypass_reason) == (CacheState.BYPASS, "DISABLED")
    assert answer.cache.scope_fingerprint, "the cache service names the scope even uncached"
