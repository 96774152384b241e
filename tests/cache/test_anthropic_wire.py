"""The Anthropic adapter (a MARKED provider) with the real ``anthropic`` SDK
against the fake Messages API server: the wire format of tools, tool calls
and results, breakpoints only on leased calls, cache-write and cache-read
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
from cache_service.providers.anthropic.adapter import AnthropicProvider
from tests.cache.support import SYSTEM, Harness, scope
from tests.fakes.anthropic_server import FakeAnthropic

MODEL = "claude-sonnet-4-5"
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
    return scope(model=MODEL, provider="anthropic")


def _call(question: str = "And tomorrow?", history: tuple[dict[str, Any], ...] = HISTORY) -> ModelCall:
    return ModelCall(MODEL, (*history, {"role": "user", "parts": [{"text": question}]}), SYSTEM, TOOLS,
                     {"mode": "AUTO"}, {"maxOutputTokens": 256, "temperature": 0.2})


def _prefix() -> PrefixView:
    return PrefixView.of(Prefix(MODEL, SYSTEM, TOOLS, {"mode": "AUTO"}, HISTORY))


def _marks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Where the breakpoints are: ("system"|"tools"|message index, ttl)."""
    out: list[tuple[str, Any]] = []
    for b in body.get("system") or []:
        if "cache_control" in b:
            out.append(("system", b["cache_control"].get("ttl")))
    for t in body.get("tools") or []:
        if "cache_control" in t:
            out.append(("tools", t["cache_control"].get("ttl")))
    for i, m in enumerate(body["messages"]):
        for b in m["content"]:
            if "cache_control" in b:
                out.append((f"message {i}", b["cache_control"].get("ttl")))
    return out


@pytest.fixture
def fake() -> Any:
    with FakeAnthropic(min_cache_tokens=64) as server:
        yield server


@pytest.fixture
async def anthropic_harness(harness_factory: Callable[..., Any], fake: FakeAnthropic) -> AsyncIterator[Harness]:
    provider = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url, request_timeout_s=10,
                                 min_cache_tokens=64)
    h = await harness_factory(provider=provider, live=lambda: set(),
                              harness_clock=ManualClock(start_wall=time.time()),
                              policy=PolicySettings(min_prefix_tokens=64, sightings_before_create=0))
    yield h
    await provider.close()


async def _lease(h: Harness, ttl: float | None = None) -> str:
    r = await h.acquire(_prefix(), _scope(), ttl=ttl)
    assert r.info.state is CacheState.CREATED
    return r.lease


async def test_an_entry_is_a_record_not_a_resource(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    h = anthropic_harness
    assert h.provider.cache_kind is CacheKind.MARKED and h.provider.named_caches is None
    await _lease(h)
    [entry] = await h.registry.entries()
    # Expires at Anthropic's 5-minute TTL; nothing was sent, nothing journaled.
    assert entry.handle.expire_time == pytest.approx(h.clock.wall() + 300)
    assert fake.calls == [] and h.journal.pending() == []
    await h.registry.invalidate(_scope())
    await h.settle()
    assert fake.calls == [] and h.janitor.deleted == 0


async def test_a_leased_call_marks_the_head_and_the_prefix_and_reads_it_back(
        anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    h = anthropic_harness
    lease = await _lease(h)
    gen = Generator(h.registry)
    reply, info = await gen.generate(_scope(), _call(), lease)
    [first] = fake.calls_of("generate")
    body = first.body
    assert first.path == "/v1/messages" and "x-api-key" not in first.headers
    # Head, leased prefix, and (the conversation goes on) the request's end.
    assert _marks(body) == [("system", None), ("message 3", None), ("message 4", None)]
    assert body["system"] == [{"type": "text", "text": SYSTEM["parts"][0]["text"], "cache_control": {"type": "ephemeral"}}]
    assert body["tools"] == [{"name": "get_weather", "description": "Weather of a city.", "input_schema": PARAMS}]
    assert body["tool_choice"] == {"type": "auto"}
    assert (body["max_tokens"], body["temperature"]) == (256, 0.2)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert body["messages"][1]["content"] == [{"type": "tool_use", "id": "c1", "name": "get_weather",
                                               "input": {"city": "Paris"}}]
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "c1",
                                               "content": '{"celsius": 21, "sky": "clear"}'}]
    # The first leased call writes all of it.
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == 0
    assert reply.usage.cache_write_tokens == reply.usage.prompt_tokens
    assert info.state is CacheState.CREATED
    again, info = await gen.generate(_scope(), _call("And next week?"), lease)
    assert again.usage is not None
    # The next reads the leased prefix and writes only its new question.
    assert 0 < again.usage.cached_prompt_tokens < reply.usage.cache_write_tokens
    assert 0 < again.usage.cache_write_tokens < again.usage.cached_prompt_tokens
    assert again.usage.prompt_tokens == again.usage.cached_prompt_tokens + again.usage.cache_write_tokens
    assert again.content == {"role": "model", "parts": [{"text": "fake reply to 5 messages"}]}
    assert again.finish_reason == "STOP"


async def test_an_hour_long_ttl_writes_for_an_hour(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    h = anthropic_harness
    lease = await _lease(h, ttl=1800)
    [entry] = await h.registry.entries()
    assert entry.handle.expire_time == pytest.approx(h.clock.wall() + 3600)
    reply, _ = await Generator(h.registry).generate(_scope(), _call(), lease)
    assert _marks(fake.calls_of("generate")[0].body) == [("system", "1h"), ("message 3", "1h"), ("message 4", "1h")]
    assert reply.usage is not None and reply.usage.cache_write_tokens > 0


async def test_a_lease_on_the_head_alone_writes_only_the_head_but_on_the_creating_call(
        anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    """The creating call bet on a follower and writes through its input; a
    later call sharing only the head (another session's first) does not."""
    h = anthropic_harness
    head = PrefixView.of(Prefix(MODEL, SYSTEM, TOOLS, {"mode": "AUTO"}, ()))
    r = await h.acquire(head, _scope())
    assert r.info.state is CacheState.CREATED
    await Generator(h.registry).generate(_scope(), _call(history=()), r.lease)
    assert _marks(fake.calls_of("generate")[0].body) == [("system", None), ("message 0", None)]
    again = await h.acquire(head, _scope())
    assert again.info.state is CacheState.HIT
    reply, _ = await Generator(h.registry).generate(_scope(), _call(history=()), again.lease)
    assert _marks(fake.calls_of("generate")[1].body) == [("system", None)]
    # It reads the head the first call wrote, and writes nothing.
    assert reply.usage is not None and (reply.usage.cache_write_tokens, reply.usage.cached_prompt_tokens > 0) == (0, True)


async def test_an_unleased_call_carries_no_breakpoint(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    reply, info = await Generator(anthropic_harness.registry).generate(_scope(), _call(), "")
    assert _marks(fake.calls_of("generate")[0].body) == []
    assert reply.usage is not None and (reply.usage.cache_write_tokens, reply.usage.cached_prompt_tokens) == (0, 0)
    assert info.state is CacheState.UNSPECIFIED


async def test_a_tool_call_reply_and_its_stream(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    h = anthropic_harness
    lease = await _lease(h)
    gen = Generator(h.registry)
    reply, _ = await gen.generate(_scope(), _call("call get_weather for Rome"), lease)
    [part] = reply.content["parts"] if reply.content else []
    assert part["functionCall"]["name"] == "get_weather" and part["functionCall"]["id"].startswith("toolu_")
    assert part["functionCall"]["args"] == {"query": "call get_weather for Rome"}
    chunks = [c async for c in gen.stream(_scope(), _call("call get_weather for Oslo"), lease)]
    calls = [p["functionCall"] for c, _ in chunks if c.content for p in c.content["parts"] if "functionCall" in p]
    assert [c["args"] for c in calls] == [{"query": "call get_weather for Oslo"}]
    last, info = chunks[-1]
    assert last.usage is not None and last.usage.cached_prompt_tokens > 0 and last.finish_reason == "STOP"
    assert info is not None and info.state is CacheState.CREATED
    assert fake.calls_of("stream")[0].body["stream"] is True


async def test_a_text_stream_arrives_in_pieces_with_usage_last(anthropic_harness: Harness) -> None:
    chunks = [c async for c, _ in Generator(anthropic_harness.registry).stream(_scope(), _call(), "")]
    text = "".join(p["text"] for c in chunks if c.content for p in c.content["parts"])
    assert text == "fake reply to 5 messages"
    assert len([c for c in chunks if c.content]) == 5
    assert chunks[-1].usage is not None and chunks[-1].usage.output_tokens == 5
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_rate_limit_carries_retry_after(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    fake.fail_rate_limited("generate", retry_after="7")
    with pytest.raises(ResourceExhausted) as err:
        await Generator(anthropic_harness.registry).generate(_scope(), _call(), "")
    assert (err.value.reason, err.value.retry_after) == ("RATE_LIMITED", 7.0)


async def test_a_prompt_too_long_is_context_window_exceeded(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    fake.fail_prompt_too_long("generate", prompt=212_345, window=200_000)
    with pytest.raises(InvalidArgument) as err:
        await Generator(anthropic_harness.registry).generate(_scope(), _call(), "")
    assert err.value.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert err.value.metadata == {"prompt_tokens": "212345", "context_window": "200000"}
    # The fake's own window check answers the same way.
    fake.context_window = 50
    with pytest.raises(InvalidArgument) as err:
        await Generator(anthropic_harness.registry).generate(_scope(), _call(), "")
    assert err.value.reason == "CONTEXT_WINDOW_EXCEEDED" and err.value.metadata["context_window"] == "50"


async def test_a_prompt_that_fits_without_room_for_max_tokens_is_retried_with_less(
        anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    # "input length and `max_tokens` exceed context limit: A + B > C": one
    # retry with max_tokens lowered to C - A less a margin, for both calls.
    gen = Generator(anthropic_harness.registry)
    prompt = await anthropic_harness.provider.count_tokens(_call())
    fake.context_window = prompt + 200
    reply, _ = await gen.generate(_scope(), _call(), "")
    chunks = [c async for c, _ in gen.stream(_scope(), _call(), "")]
    assert reply.content is not None and chunks[-1].usage is not None
    sent = [(c.op, c.status, c.body["max_tokens"]) for c in fake.calls if c.op != "count"]
    lowered = sent[1][2]
    assert 0 < lowered < 200 and sent == [("generate", 400, 256), ("generate", 200, lowered),
                                          ("stream", 400, 256), ("stream", 200, lowered)]
    # No room left for a reply: a context overflow (the context service compacts).
    fake.context_window = prompt + 5
    with pytest.raises(InvalidArgument) as err:
        await gen.generate(_scope(), _call(), "")
    assert err.value.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert err.value.metadata == {"prompt_tokens": str(prompt), "context_window": str(prompt + 5)}
    assert [c.body["max_tokens"] for c in fake.calls[-1:]] == [256]


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-haiku-4-5-20251001", "claude-opus-4-1",
                                   "claude-opus-4-6"])
async def test_temperature_with_top_p_is_refused_before_sending_where_the_model_refuses_it(
        anthropic_harness: Harness, fake: FakeAnthropic, model: str) -> None:
    gen = Generator(anthropic_harness.registry)
    both = ModelCall(model, _call().contents, SYSTEM, TOOLS, {"mode": "AUTO"},
                     {"maxOutputTokens": 64, "temperature": 0.2, "topP": 0.9})
    with pytest.raises(InvalidArgument) as err:
        await gen.generate(scope(model=model, provider="anthropic"), both, "")
    with pytest.raises(InvalidArgument) as streamed:
        [c async for c in gen.stream(scope(model=model, provider="anthropic"), both, "")]
    for e in (err.value, streamed.value):
        assert e.reason == "INVALID_ARGUMENT"
        assert [v.field for v in e.field_violations] == ["generation_config.top_p"]
    assert fake.calls == []
    # Either one alone is sent as asked.
    for one in ({"temperature": 0.2}, {"topP": 0.9}):
        await gen.generate(scope(model=model, provider="anthropic"),
                           ModelCall(model, both.contents, SYSTEM, TOOLS, {"mode": "AUTO"}, one), "")
    assert [("temperature" in c.body, "top_p" in c.body) for c in fake.calls] == [(True, False), (False, True)]


async def test_older_claude_models_take_temperature_with_top_p(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    for model in ("claude-sonnet-4-20250514", "claude-3-7-sonnet-latest", "claude-opus-4-0"):
        both = ModelCall(model, _call().contents, SYSTEM, TOOLS, {"mode": "AUTO"}, {"temperature": 0.2, "topP": 0.9})
        await Generator(anthropic_harness.registry).generate(scope(model=model, provider="anthropic"), both, "")
    assert [(c.status, c.body["top_p"]) for c in fake.calls] == [(200, 0.9)] * 3


async def test_overload_auth_and_stream_errors(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    gen = Generator(anthropic_harness.registry)
    fake.fail("generate", 529, "overloaded_error", "Overloaded", retry_after="3")
    with pytest.raises(Unavailable) as unavailable:
        await gen.generate(_scope(), _call(), "")
    assert (unavailable.value.reason, unavailable.value.retry_after) == ("PROVIDER_UNAVAILABLE", 3.0)
    fake.fail("generate", 401, "authentication_error", "invalid x-api-key")
    with pytest.raises(PermissionDenied):
        await gen.generate(_scope(), _call(), "")
    fake.fail("stream", 200, "overloaded_error", "Overloaded", after_chunks=2)
    with pytest.raises(Unavailable):
        [c async for c in gen.stream(_scope(), _call(), "")]


async def test_count_tokens_and_ids_made_up_pairwise(anthropic_harness: Harness, fake: FakeAnthropic) -> None:
    history = (
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"sky": "grey"}}}]},
    )
    assert await anthropic_harness.provider.count_tokens(_call(history=history)) > 0
    body = fake.calls_of("count")[0].body
    use, result = body["messages"][1]["content"][0], body["messages"][2]["content"][0]
    assert use["id"] == result["tool_use_id"] and "max_tokens" not in body
