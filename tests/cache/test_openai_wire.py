"""The OpenAI-compatible adapter (an AUTOMATIC provider) with the real
``openai`` SDK against the fake Chat Completions server, in the OpenAI and
the vLLM error flavors: the wire format of tools, tool calls and results,
the scope's prompt_cache_key on every call (leased or not), cached-token
accounting, streaming, rate limits and context overflow mapped to our
reasons, and no provider call for what the registry does to an entry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentctx_common.errors import InvalidArgument, PermissionDenied, ResourceExhausted, Unavailable
from cache_service.domain.clock import ManualClock
from cache_service.domain.generation import Generator
from cache_service.domain.keys import Prefix, PrefixView
from cache_service.domain.model import CacheState, ModelCall
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import CacheKind
from cache_service.providers.openai.adapter import OpenAIProvider
from tests.cache.support import SYSTEM, Harness, scope
from tests.fakes.openai_server import FakeOpenAI

MODEL = "gpt-5-mini"
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = ({"functionDeclarations": [{"name": "get_weather", "description": "Weather of a city.", "parameters": PARAMS}]},)
HISTORY = (
    {"role": "user", "parts": [{"text": "What is the weather in Paris? " * 8}]},
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "get_weather",
                                                     "response": {"sky": "clear", "celsius": 21}}}]},
    {"role": "model", "parts": [{"text": "It is clear and 21 degrees in Paris."}]},
)


def _scope() -> Any:
    return scope(model=MODEL, provider="openai")


def _call(question: str = "And tomorrow?", history: tuple[dict[str, Any], ...] = HISTORY,
          generation: dict[str, Any] | None = None) -> ModelCall:
    return ModelCall(MODEL, (*history, {"role": "user", "parts": [{"text": question}]}), SYSTEM, TOOLS,
                     {"mode": "AUTO"}, generation if generation is not None else {"maxOutputTokens": 256})


def _prefix() -> PrefixView:
    return PrefixView.of(Prefix(MODEL, SYSTEM, TOOLS, {"mode": "AUTO"}, HISTORY))


@pytest.fixture(params=["openai", "vllm"])
def fake(request: pytest.FixtureRequest) -> Any:
    with FakeOpenAI(min_cache_tokens=64, flavor=request.param) as server:
        yield server


async def _harness(factory: Callable[..., Any], provider: OpenAIProvider) -> Harness:
    h: Harness = await factory(provider=provider, live=lambda: set(),
                               harness_clock=ManualClock(start_wall=time.time()),
                               policy=PolicySettings(min_prefix_tokens=64, sightings_before_create=0))
    return h


@pytest.fixture
async def openai_harness(harness_factory: Callable[..., Any], fake: FakeOpenAI) -> AsyncIterator[Harness]:
    provider = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1", request_timeout_s=10,
                              min_cache_tokens=64)
    yield await _harness(harness_factory, provider)
    await provider.close()


async def test_an_entry_is_a_record_and_every_call_carries_the_heads_key(
        openai_harness: Harness, fake: FakeOpenAI) -> None:
    h = openai_harness
    assert h.provider.cache_kind is CacheKind.AUTOMATIC and h.provider.named_caches is None
    gen = Generator(h.registry)
    # Unleased: the server caches it by itself, under the key of its app's head.
    first, _ = await gen.generate(_scope(), _call("hello there"), "")
    assert first.usage is not None and first.usage.cached_prompt_tokens == 0
    r = await h.acquire(_prefix(), _scope())
    assert r.info.state is CacheState.CREATED
    [entry] = await h.registry.entries()
    assert entry.handle.expire_time == pytest.approx(h.clock.wall() + 300)
    assert len(fake.calls) == 1 and h.journal.pending() == []
    reply, info = await gen.generate(_scope(), _call(), r.lease)
    again, _ = await gen.generate(_scope(), _call("And next week?"), r.lease)
    keys = {c.body.get("prompt_cache_key") for c in fake.calls_of("generate")}
    assert keys == {gen.routing_keys.of(_scope().app, _call())}
    assert reply.usage is not None and again.usage is not None
    # Both read the history the unleased call sent; only the question is new.
    assert 0 < reply.usage.cached_prompt_tokens == again.usage.cached_prompt_tokens < again.usage.prompt_tokens
    assert info.state is CacheState.CREATED
    await h.registry.invalidate(_scope())
    await h.settle()
    assert len(fake.calls) == 3 and h.janitor.deleted == 0


async def test_the_wire_format_of_tools_calls_and_results(openai_harness: Harness, fake: FakeOpenAI) -> None:
    gen = Generator(openai_harness.registry)
    await gen.generate(_scope(), _call(generation={"maxOutputTokens": 99, "temperature": 0.3, "topP": 0.9,
                                                   "stopSequences": ["END"], "topK": 5}), "")
    body = fake.calls_of("generate")[0].body
    assert body["messages"][0] == {"role": "system", "content": SYSTEM["parts"][0]["text"]}
    assert body["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": '{"celsius": 21, "sky": "clear"}'}
    assert body["messages"][-1] == {"role": "user", "content": "And tomorrow?"}
    assert body["tools"] == [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMS,
                                                               "description": "Weather of a city."}}]
    assert body["tool_choice"] == "auto"
    assert (body["max_completion_tokens"], body["temperature"], body["top_p"], body["stop"]) == (99, 0.3, 0.9, ["END"])
    assert body["top_k"] == 5  # a compatible server (a base_url) takes it
    reply, _ = await gen.generate(_scope(), _call("call get_weather for Rome"), "")
    [part] = reply.content["parts"] if reply.content else []
    assert part["functionCall"]["name"] == "get_weather" and part["functionCall"]["args"] == {
        "query": "call get_weather for Rome"}
    assert reply.finish_reason == "STOP"


async def test_streams_of_text_and_of_tool_calls(openai_harness: Harness, fake: FakeOpenAI) -> None:
    gen = Generator(openai_harness.registry)
    chunks = [c async for c, _ in gen.stream(_scope(), _call(), "")]
    assert "".join(p["text"] for c in chunks if c.content for p in c.content["parts"]) == "fake reply to 6 messages"
    assert len([c for c in chunks if c.content]) == 5
    assert chunks[-1].usage is not None and chunks[-1].finish_reason == "STOP"
    assert all(c.usage is None for c in chunks[:-1])
    assert fake.calls_of("stream")[0].body["stream_options"] == {"include_usage": True}
    tool_chunks = [c async for c, _ in gen.stream(_scope(), _call("call get_weather for Oslo"), "")]
    calls = [p["functionCall"] for c in tool_chunks if c.content for p in c.content["parts"] if "functionCall" in p]
    assert [c["args"] for c in calls] == [{"query": "call get_weather for Oslo"}]
    assert tool_chunks[-1].usage is not None and tool_chunks[-1].usage.cached_prompt_tokens > 0


async def test_a_rate_limit_carries_retry_after(openai_harness: Harness, fake: FakeOpenAI) -> None:
    fake.fail_rate_limited("generate", retry_after="7")
    with pytest.raises(ResourceExhausted) as err:
        await Generator(openai_harness.registry).generate(_scope(), _call(), "")
    assert (err.value.reason, err.value.retry_after) == ("RATE_LIMITED", 7.0)


async def test_context_length_is_context_window_exceeded(openai_harness: Harness, fake: FakeOpenAI) -> None:
    fake.context_window = 50
    with pytest.raises(InvalidArgument) as err:
        await Generator(openai_harness.registry).generate(_scope(), _call(), "")
    assert err.value.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert err.value.metadata["context_window"] == "50" and int(err.value.metadata["prompt_tokens"]) > 50


async def test_vllm_overflow_texts_are_context_window_exceeded(harness_factory: Callable[..., Any]) -> None:
    # vLLM's own texts, with an integer code: a prompt over the window, and a
    # prompt that fits while prompt plus max_completion_tokens does not.
    with FakeOpenAI(min_cache_tokens=64, flavor="vllm") as fake:
        provider = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1", min_cache_tokens=64)
        try:
            gen = Generator((await _harness(harness_factory, provider)).registry)
            fake.context_window = 50
            with pytest.raises(InvalidArgument) as over:
                await gen.generate(_scope(), _call(), "")
            fake.context_window = 400
            with pytest.raises(InvalidArgument) as asked:
                await gen.generate(_scope(), _call(generation={"maxOutputTokens": 4000}), "")
        finally:
            await provider.close()
    assert [c.status for c in fake.calls] == [400, 400]
    assert over.value.reason == asked.value.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert over.value.metadata["context_window"] == "50" and int(over.value.metadata["prompt_tokens"]) > 50
    assert asked.value.metadata["context_window"] == "400" and 0 < int(asked.value.metadata["prompt_tokens"]) < 400


async def test_server_auth_and_stream_errors(openai_harness: Harness, fake: FakeOpenAI) -> None:
    gen = Generator(openai_harness.registry)
    fake.fail("generate", 503, "overloaded", retry_after="3")
    with pytest.raises(Unavailable) as unavailable:
        await gen.generate(_scope(), _call(), "")
    assert (unavailable.value.reason, unavailable.value.retry_after) == ("PROVIDER_UNAVAILABLE", 3.0)
    fake.fail("generate", 401, "Incorrect API key provided", code="invalid_api_key")
    with pytest.raises(PermissionDenied):
        await gen.generate(_scope(), _call(), "")
    fake.fail("stream", 500, "boom", after_chunks=2)
    with pytest.raises(Unavailable):
        [c async for c in gen.stream(_scope(), _call(), "")]


async def test_no_key_without_steering_and_retention_when_asked(harness_factory: Callable[..., Any]) -> None:
    with FakeOpenAI(min_cache_tokens=64) as fake:
        plain = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1", send_cache_key=False)
        kept = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1", retention="24h")
        try:
            await Generator((await _harness(harness_factory, plain)).registry).generate(_scope(), _call(), "")
            await Generator((await _harness(harness_factory, kept)).registry).generate(_scope(), _call(), "")
        finally:
            await plain.close()
            await kept.close()
        first, second = (c.body for c in fake.calls_of("generate"))
        assert "prompt_cache_key" not in first and "prompt_cache_retention" not in first
        assert second["prompt_cache_retention"] == "24h" and second["prompt_cache_key"]
        assert kept.prefix_ttl_s(300) == 86_400


async def test_prompt_cache_retention_is_what_each_model_accepts(harness_factory: Callable[..., Any]) -> None:
    # Configured "in_memory": sent as is before gpt-5.5, "24h" to gpt-5.5 (its
    # only value), prompt_cache_options.ttl instead of the field from gpt-5.6.
    with FakeOpenAI(min_cache_tokens=64) as fake:
        provider = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1", retention="in_memory")
        try:
            gen = Generator((await _harness(harness_factory, provider)).registry)
            for model in ("gpt-5-mini", "gpt-5.5", "gpt-5.5-pro", "gpt-5.6", "gpt-6"):
                call = ModelCall(model, _call().contents, SYSTEM, TOOLS, {"mode": "AUTO"}, {})
                await gen.generate(scope(model=model, provider="openai"), call, "")
        finally:
            await provider.close()
    sent = [(c.status, c.body.get("prompt_cache_retention"), c.body.get("prompt_cache_options"))
            for c in fake.calls_of("generate")]
    assert sent == [(200, "in_memory", None), (200, "24h", None), (200, "24h", None),
                    (200, None, {"ttl": "30m"}), (200, None, {"ttl": "30m"})]
