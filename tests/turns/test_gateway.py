"""The model-call leg against the real cache service: one call that
leases the prefix for itself, its record, and caching off."""

from __future__ import annotations

import pytest

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2
from context_service.building.builder import ContextBuilder
from context_service.building.history import HistoryCache
from context_service.building.types import BuiltContext
from context_service.cache_client import CacheClient, call_request
from context_service.domain import turn_rules
from context_service.domain.config import CachePolicy, ContextConfig
from context_service.domain.limits import Limits
from context_service.domain.model import CacheState, Event, SessionKey
from context_service.domain.session_records import SessionHead
from context_service.mapping.build_context import RequestMapper, model_request
from context_service.mapping.wire import render
from context_service.turns.gateway import ModelGateway, cache_scope, lease_request
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


async def test_the_call_leases_everything_before_the_input() -> None:
    built = await _request(2)
    lease = lease_request(KEY, POLICY, 1)
    assert lease is not None and lease.suffix == 1 and len(lease.holder) == 32
    assert lease_request(SessionKey("app", "user-1", "s2"), POLICY, 1).holder != lease.holder  # type: ignore[union-attr]
    assert lease_request(KEY, POLICY, 0).suffix == 1, "the last content is never cached"  # type: ignore[union-attr]
    assert lease_request(KEY, CachePolicy(enabled=False), 1) is None
    call = cpb.GenerateContentRequest.FromString(call_request(cache_scope(KEY, MODEL, POLICY), built, lease))
    assert call.request == model_request(built) and len(call.request.contents) == 5
    assert (call.acquire.suffix_contents, call.acquire.holder, call.lease) == (1, lease.holder, "")
    scope = call.scope
    assert (scope.app, scope.user, scope.model, scope.provider) == ("app", "user-1", MODEL, "")
    assert dict(scope.policy) == {"context_version": 2}
    unleased = cpb.GenerateContentRequest.FromString(call_request(cache_scope(KEY, MODEL, POLICY), built, None))
    assert not unleased.HasField("acquire") and unleased.request == call.request


async def test_one_call_creates_then_hits_and_leaves_no_lease(pair, gateway) -> None:
    gw, _ = gateway
    deadline = turn_rules.Deadline(10.0)
    scope = cache_scope(KEY, MODEL, POLICY)
    built = await _request(3)
    lease = lease_request(KEY, POLICY, 1)
    states = []
    for _ in range(3):
        answer = await gw.generate(scope, built, lease, deadline)
        states.append((answer.cache.state, answer.cache.bypass_reason))
    assert states[0] == (CacheState.BYPASS, "FIRST_SIGHTING")
    assert [s for s, _ in states[1:]] == [CacheState.CREATED, CacheState.HIT]
    items = [item async for item in gw.stream(scope, built, lease, deadline)]
    final = items[-1]
    assert isinstance(final, turn_rules.ModelAnswer) and final.cache.state is CacheState.HIT
    assert final.content == turn_rules.merge_chunks(items[:-1])
    assert answer.usage is not None and answer.usage.cached_prompt_tokens > 0
    entries = await pair.cache_app.registry.entries()
    assert len(entries) == 1 and not entries[0].leases, "every lease was released by its call"


async def test_caching_off_sends_no_lease_and_records_disabled(pair, gateway) -> None:
    gw, _ = gateway
    off = CachePolicy(enabled=False)
    scope = cache_scope(KEY, MODEL, off)
    built = await _request(3)
    answer = await gw.generate(scope, built, lease_request(KEY, off, 1), turn_rules.Deadline(10.0))
    assert (answer.cache.state, answer.cache.bypass_reason) == (CacheState.BYPASS, "DISABLED")
    assert answer.cache.scope_fingerprint, "the cache service names the scope even uncached"
