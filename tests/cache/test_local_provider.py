"""The local simulator: deterministic replies and tool calls, explicit
caches with a minimum size and TTL expiry on an injected clock, the context
window, and Gemini-like billing."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace

import pytest

from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import CanonicalContent, Prefix, PrefixView
from cache_service.domain.model import CacheSpec, ModelCall
from cache_service.domain.ports import CacheNotFound, CacheTooSmall, ContextWindowExceeded, InvalidRequest
from cache_service.domain.pricing import Bill, Pricing
from cache_service.providers.local import LocalProvider
from tests.cache.support import MODEL, SYSTEM, TOOLS, call_over, prefix


def _spec(turns: int = 3, ttl: float = 300) -> CacheSpec:
    p = prefix(turns)
    return CacheSpec(p.model, p.system_instruction, p.tools, p.tool_config, p.history, ttl, "agentctx-t")


def _user(text: str) -> dict:  # type: ignore[type-arg]
    return {"role": "user", "parts": [{"text": text}]}


async def test_replies_are_deterministic_and_independent_of_caching() -> None:
    a, b = LocalProvider(min_cache_tokens=64), LocalProvider(min_cache_tokens=64)
    call = call_over(prefix(3), "tell me a story")
    first, second = await a.generate(call, None), await b.generate(call, None)
    assert first == second
    handle = await a.create_cache(_spec(3))
    cached = await a.generate(ModelCall(MODEL, call.contents[6:]), handle.name)
    assert cached.content == first.content
    assert cached.usage is not None and cached.usage.cached_prompt_tokens == PrefixView.of(prefix(3)).tokens
    other = await a.generate(call_over(prefix(3), "something else"), None)
    assert other.content != first.content
    # Contents measured by the content memo (CanonicalContent) answer and count alike.
    measured = replace(call, contents=tuple(CanonicalContent(c) for c in call.contents))
    assert await b.generate(measured, None) == first
    again = await a.generate(replace(measured, contents=measured.contents[6:], system_instruction=None, tools=()),
                             handle.name)
    assert again == cached


async def test_naming_a_declared_tool_calls_it_and_its_result_is_acknowledged() -> None:
    p = LocalProvider()
    ask = ModelCall(MODEL, (_user("please lookup the capital of France"),), SYSTEM, TOOLS)
    reply = await p.generate(ask, None)
    call = reply.content["parts"][0]["functionCall"]  # type: ignore[index]
    assert call["name"] == "lookup" and call["args"] == {"query": "please lookup the capital of France"}
    assert call["id"].startswith("call-") and call == (await p.generate(ask, None)).content["parts"][0]["functionCall"]  # type: ignore[index]
    answered = ModelCall(MODEL, (*ask.contents, reply.content,  # type: ignore[arg-type]
                                 {"role": "user", "parts": [{"functionResponse": {
                                     "id": call["id"], "name": "lookup", "response": {"capital": "Paris"}}}]}),
                         SYSTEM, TOOLS)
    text = (await p.generate(answered, None)).content["parts"][0]["text"]  # type: ignore[index]
    assert "lookup" in text
    # Without declared tools the same words are just text.
    plain = await p.generate(ModelCall(MODEL, ask.contents), None)
    assert "text" in plain.content["parts"][0]  # type: ignore[index]


async def test_cache_minimum_size_expiry_and_deletion() -> None:
    clock = ManualClock()
    p = LocalProvider(clock=clock, min_cache_tokens=100_000)
    with pytest.raises(CacheTooSmall) as small:
        await p.create_cache(_spec(3))
    assert small.value.min_tokens == 100_000
    p = LocalProvider(clock=clock, min_cache_tokens=64)
    handle = await p.create_cache(_spec(3, ttl=60))
    assert handle.name.reveal().startswith("cachedContents/loc-") and handle.expire_time == clock.wall() + 60
    assert [c.display_name for c in await p.list_caches()] == ["agentctx-t"]
    clock.advance(30)
    refreshed = await p.update_ttl(handle.name, 60)
    assert refreshed.expire_time == clock.wall() + 60
    clock.advance(61)
    with pytest.raises(CacheNotFound):
        await p.generate(ModelCall(MODEL, (_user("x"),)), handle.name)
    with pytest.raises(CacheNotFound):
        await p.delete_cache(handle.name)
    assert await p.list_caches() == []


async def test_a_request_naming_a_cache_must_not_repeat_the_cached_fields() -> None:
    p = LocalProvider(min_cache_tokens=64)
    handle = await p.create_cache(_spec(3))
    with pytest.raises(InvalidRequest):
        await p.generate(ModelCall(MODEL, (_user("x"),), SYSTEM), handle.name)
    with pytest.raises(InvalidRequest):
        await p.generate(ModelCall(MODEL, ()), handle.name)
    with pytest.raises(InvalidRequest):
        await p.generate(ModelCall("gemini-2.5-flash", (_user("x"),)), None)


async def test_context_window_overflow_reports_the_figures() -> None:
    p = LocalProvider(context_window=300)
    call = call_over(prefix(3))
    with pytest.raises(ContextWindowExceeded) as err:
        await p.generate(call, None)
    assert err.value.context_window == 300
    assert err.value.prompt_tokens == await p.count_tokens(call) > 300


async def test_billing_counts_writes_reads_storage_and_output() -> None:
    clock = ManualClock()
    p = LocalProvider(clock=clock, min_cache_tokens=64)
    call = call_over(prefix(3))
    uncached = await p.generate(call, None)
    handle = await p.create_cache(_spec(3, ttl=3600))
    cached = await p.generate(ModelCall(MODEL, call.contents[6:]), handle.name)
    clock.advance(1800)
    await p.delete_cache(handle.name)
    clock.advance(1800)  # storage stops at deletion
    bill = p.bill()
    tokens = handle.tokens or 0
    assert uncached.usage is not None and cached.usage is not None
    assert bill.cache_write_tokens == tokens and bill.cached_tokens == tokens
    assert bill.input_tokens == uncached.usage.prompt_tokens + cached.usage.prompt_tokens - tokens
    assert bill.storage_token_hours == pytest.approx(tokens * 0.5)
    assert bill.output_tokens == uncached.usage.output_tokens + cached.usage.output_tokens and bill.calls == 2
    expected = ((bill.input_tokens + tokens) * 0.30 + tokens * 0.03 + tokens * 0.5 * 1.00
                + bill.output_tokens * 2.50) / 1e6
    assert bill.cost(Pricing()) == pytest.approx(expected)
    assert Bill().cost() == 0


async def test_streams_split_the_reply_into_chunks_with_usage_last() -> None:
    p = LocalProvider()
    call = call_over(prefix(1))
    chunks = [c async for c in p.stream_generate(call, None)]
    whole = await p.generate(call, None)
    assert "".join(c.content["parts"][0]["text"] for c in chunks) == whole.content["parts"][0]["text"]  # type: ignore[index]
    assert [c.usage is not None for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].usage == whole.usage and chunks[-1].finish_reason == "STOP"


async def test_deleted_and_expired_caches_leave_only_their_bill_behind() -> None:
    """Regression: every deleted, expired or lost cache was kept with a deep
    copy of its prefix (500 cycles of a 60 KB prefix held 36.5 MiB). Memory
    after many cycles is flat, and their storage is still billed."""
    clock = ManualClock()
    p = LocalProvider(clock=clock, min_cache_tokens=64)
    big = CacheSpec(MODEL, SYSTEM, TOOLS, None, tuple(_user(f"{i} " + "x" * 1000) for i in range(60)), 60,
                    "agentctx-big")

    async def cycle(i: int) -> None:
        handle = await p.create_cache(big)
        clock.advance(6)
        if i % 3 == 0:
            await p.delete_cache(handle.name)
        elif i % 3 == 1:
            clock.advance(60)  # expired: found gone at the next touch
            with pytest.raises(CacheNotFound):
                await p.update_ttl(handle.name, 60)
        else:
            p.lose_caches()

    for i in range(30):
        await cycle(i)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(30, 330):
            await cycle(i)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One retained prefix is ~60 KB; 300 of them were ~18 MiB.
    assert after - before < 256 * 1024
    assert p.live_names() == set()
    tokens = PrefixView.of(Prefix(MODEL, SYSTEM, TOOLS, None, big.contents)).tokens
    # Each cache was stored for 6 s, except the expired ones: their full 60 s TTL.
    billed_seconds = sum(60 if i % 3 == 1 else 6 for i in range(330))
    assert p.bill().storage_token_hours == pytest.approx(tokens * billed_seconds / 3600)
