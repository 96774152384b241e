"""Model calls with and without a lease, over the local simulator: the
request rewrite, prefix checks, the missing-cache retry, error mapping, and
the lifecycle bugs the ADK Go #1951 review found, translated to leases."""

from __future__ import annotations

import asyncio
import copy

import pytest

from agentctx_common.errors import (
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from cache_service.domain.generation import Generator, rewrite_for_cache
from cache_service.domain.model import BypassReason, CacheState, ModelCall, ModelReply, Usage
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import CacheNotFound, ProviderPermissionDenied, RateLimited
from tests.cache.support import MODEL, TOOLS, call_over, prefix, scope, view

EAGER = PolicySettings(min_prefix_tokens=64, sightings_before_create=0)


@pytest.fixture
async def h(harness_factory):  # type: ignore[no-untyped-def]
    return await harness_factory(policy=EAGER)


async def _stream(gen: Generator, call: ModelCall, lease: str) -> list:  # type: ignore[type-arg]
    return [item async for item in gen.stream(scope(), call, lease)]


async def test_with_a_lease_only_the_uncached_suffix_is_sent(h) -> None:
    p = prefix(3)
    r = await h.acquire(p)
    call = call_over(p, "lookup the weather")
    reply, info = await Generator(h.registry).generate(scope(), call, r.lease)
    assert info.state is CacheState.CREATED and info.prefix_fingerprint == view(3).fingerprint
    cached = h.provider.cached_prefix((await h.registry.entries())[0].handle.name)
    assert cached.contents == p.history and cached.tools == TOOLS
    # The cache's tools answer the tool-naming question: the reply calls it.
    assert reply.content is not None and "functionCall" in reply.content["parts"][0]
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == info.prefix_tokens
    assert reply.usage.prompt_tokens > reply.usage.cached_prompt_tokens


def test_rewrite_builds_a_new_request_and_leaves_the_callers_alone() -> None:
    """ADK Go #1951: options were shared mutably between the caller and the
    requests. The rewrite never edits the caller's request."""
    call = call_over(prefix(3))
    call.generation_config["temperature"] = 0.5
    before = copy.deepcopy(call)
    sent = rewrite_for_cache(call, 6)
    assert (sent.system_instruction, sent.tools, sent.tool_config) == (None, (), None)
    assert sent.contents == call.contents[6:] and len(sent.contents) == 1
    sent.generation_config["temperature"] = 1.5
    assert call == before and call.generation_config == {"temperature": 0.5}


async def test_the_cache_holds_a_copy_of_the_prefix(h) -> None:
    """Nothing the caller holds can change what is cached (nested maps too)."""
    p = prefix(3)
    history = [copy.deepcopy(c) for c in p.history]
    mutable = type(p)(p.model, p.system_instruction, p.tools, p.tool_config, tuple(history))
    await h.acquire(mutable)
    history[0]["parts"][0]["text"] = "changed after the create"
    cached = h.provider.cached_prefix((await h.registry.entries())[0].handle.name)
    assert cached.contents[0]["parts"][0]["text"].startswith("question 0")


async def test_a_request_that_does_not_start_with_the_leased_prefix_is_refused(h) -> None:
    r = await h.acquire(prefix(3))
    gen = Generator(h.registry)
    other = call_over(prefix(3, system={"role": "", "parts": [{"text": "changed"}]}))
    with pytest.raises(FailedPrecondition) as err:
        await gen.generate(scope(), other, r.lease)
    assert err.value.reason == "LEASE_PREFIX_MISMATCH"
    edited = call_over(prefix(3))
    edited = ModelCall(edited.model, (edited.contents[0], {"role": "user", "parts": [{"text": "x"}]},
                                      *edited.contents[2:]), edited.system_instruction, edited.tools)
    with pytest.raises(FailedPrecondition):
        await gen.generate(scope(), edited, r.lease)
    with pytest.raises(InvalidArgument) as empty:
        await gen.generate(scope(), ModelCall(MODEL, prefix(3).history, prefix(3).system_instruction, TOOLS), r.lease)
    assert empty.value.reason == "EMPTY_SUFFIX"
    assert h.provider.counts["generate"] == 0


async def test_leases_are_checked_at_generate(h) -> None:
    gen = Generator(h.registry)
    r = await h.acquire(prefix(3))
    with pytest.raises(FailedPrecondition) as forged:
        await gen.generate(scope(), call_over(prefix(3)), "v1.forged.lease")
    assert (forged.value.reason, forged.value.metadata["invalid_reason"]) == ("LEASE_INVALID", "MALFORMED")
    with pytest.raises(PermissionDenied) as other:
        await gen.generate(scope(user="intruder"), call_over(prefix(3)), r.lease)
    assert other.value.reason == "LEASE_SCOPE_MISMATCH"
    await h.registry.invalidate(scope())
    with pytest.raises(FailedPrecondition) as gone:
        await gen.generate(scope(), call_over(prefix(3)), r.lease)
    assert gone.value.metadata["invalid_reason"] == "INVALIDATED"
    assert h.provider.counts["generate"] == 0


@pytest.mark.parametrize("streaming", [False, True])
async def test_missing_cache_is_dropped_and_the_call_sent_once_more_uncached(h, streaming: bool) -> None:
    r = await h.acquire(prefix(3))
    h.provider.lose_caches()
    gen = Generator(h.registry)
    if streaming:
        chunks = await _stream(gen, call_over(prefix(3)), r.lease)
        info = chunks[-1][1]
        usage = chunks[-1][0].usage
        assert h.provider.counts["stream"] == 2
    else:
        reply, info = await gen.generate(scope(), call_over(prefix(3)), r.lease)
        usage = reply.usage
        assert h.provider.counts["generate"] == 2
    assert (info.state, info.bypass_reason) == (CacheState.BYPASS, BypassReason.CACHE_MISSING)
    assert usage is not None and usage.cached_prompt_tokens == 0
    # The entry is gone, its lease dead, and the next acquire creates a new cache.
    assert (await h.registry.entry_count()) == 0
    with pytest.raises(FailedPrecondition):
        await gen.generate(scope(), call_over(prefix(3)), r.lease)
    assert (await h.acquire(prefix(3))).info.state is CacheState.CREATED
    await h.assert_in_step()


async def test_missing_cache_after_output_was_streamed_is_not_retried(h) -> None:
    """ADK Go #1951: the retry is allowed only before anything was yielded."""
    r = await h.acquire(prefix(3))
    h.provider.fail_stream_after(1, CacheNotFound(status=403))
    gen = Generator(h.registry)
    received = []
    with pytest.raises(Unavailable) as err:
        async for chunk, _ in gen.stream(scope(), call_over(prefix(3)), r.lease):
            received.append(chunk)
    assert err.value.reason == "CACHE_MISSING"
    assert h.provider.counts["stream"] == 1  # never sent a second time
    assert (await h.registry.entry_count()) == 0  # but the lost cache is forgotten
    await h.assert_in_step()


async def test_a_denial_that_does_not_name_the_cache_is_an_error_not_a_retry(h) -> None:
    r = await h.acquire(prefix(3))
    h.provider.fail_next("generate", ProviderPermissionDenied(status=403))
    with pytest.raises(PermissionDenied) as err:
        await Generator(h.registry).generate(scope(), call_over(prefix(3)), r.lease)
    assert err.value.reason == "PROVIDER_PERMISSION_DENIED"
    assert h.provider.counts["generate"] == 1
    assert (await h.registry.entry_count()) == 1


async def test_a_failed_call_keeps_its_cache_and_leaks_nothing(h) -> None:
    """ADK Go #1951: a reply that was never stored deleted the cache the
    session still named and leaked the cache created on that turn. Here the
    lifecycle belongs to the registry: a failed or abandoned call deletes
    nothing, the cache it created stays tracked (leased, bounded by its TTL)
    and the next call reuses it."""
    r = await h.acquire(prefix(3))
    assert r.info.state is CacheState.CREATED
    gen = Generator(h.registry)
    h.provider.fail_next("generate", RateLimited(retry_after=3))
    with pytest.raises(ResourceExhausted) as err:
        await gen.generate(scope(), call_over(prefix(3)), r.lease)
    assert (err.value.reason, err.value.retry_after) == ("RATE_LIMITED", 3)
    # The consumer of a stream goes away after the first chunk.
    stream = gen.stream(scope(), call_over(prefix(3)), r.lease)
    await anext(stream)
    await stream.aclose()
    await h.assert_in_step()
    assert len(h.provider.live_names()) == 1 and h.provider.counts["delete"] == 0
    again = await h.acquire(prefix(3))
    assert again.info.state is CacheState.HIT
    reply, _ = await gen.generate(scope(), call_over(prefix(3)), again.lease)
    assert reply.usage is not None and reply.usage.cached_prompt_tokens > 0
    # And the cache goes when its TTL ends, not before.
    h.clock.advance(400)
    await h.registry.sweep()
    await h.assert_in_step()
    assert not h.provider.live_names()


async def test_cache_is_not_deleted_while_a_lease_still_names_it(h) -> None:
    """ADK Go #1951: a cache was deleted while the stored session still named
    it, so later turns sent a dead name. Here growth replaces a cache only
    when no live lease names it; until then calls with the old lease work."""
    old = await h.acquire(prefix(3))
    grown = await h.acquire(prefix(6))
    assert grown.info.state is CacheState.GROWN
    gen = Generator(h.registry)
    reply, info = await gen.generate(scope(), call_over(prefix(6)), old.lease)
    assert info.prefix_fingerprint == old.info.prefix_fingerprint
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == old.info.prefix_tokens
    assert h.provider.counts["generate"] == 1 and h.provider.counts["delete"] == 0
    await h.registry.release(old.lease)
    await h.settle()
    assert h.provider.counts["delete"] == 1
    await h.assert_in_step()


async def test_a_failed_grow_does_not_decide_any_deletion(h) -> None:
    """ADK Go #1951: a failed write still decided deletions. A grow whose
    create fails keeps serving the old cache and deletes nothing."""
    old = await h.acquire(prefix(3))
    await h.registry.release(old.lease)
    h.provider.fail_next("create", RateLimited())
    r = await h.acquire(prefix(6))
    assert r.info.state is CacheState.HIT and r.info.prefix_fingerprint == old.info.prefix_fingerprint
    await h.settle()
    assert h.provider.counts["delete"] == 0
    reply, _ = await Generator(h.registry).generate(scope(), call_over(prefix(6)), r.lease)
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == old.info.prefix_tokens
    await h.assert_in_step()


async def test_a_failed_delete_stays_in_the_journal(h) -> None:
    from cache_service.domain.ports import ProviderUnavailable

    r = await h.acquire(prefix(3))
    h.provider.fail_next("delete", ProviderUnavailable(), times=5)
    await h.registry.invalidate(scope())
    await h.settle()
    assert h.janitor.failed == 1
    pending = h.journal.pending()
    assert len(pending) == 1 and pending[0].name is not None
    assert r.lease


async def test_context_window_overflow_maps_to_its_own_reason(harness_factory) -> None:
    h = await harness_factory(policy=EAGER)
    h.provider.context_window = 200
    with pytest.raises(InvalidArgument) as err:
        await Generator(h.registry).generate(scope(), call_over(prefix(3)), "")
    assert err.value.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert int(err.value.metadata["context_window"]) == 200
    assert int(err.value.metadata["prompt_tokens"]) > 200


async def test_streams_carry_usage_and_cache_info_on_the_last_chunk_only(h) -> None:
    r = await h.acquire(prefix(3))
    chunks = await _stream(Generator(h.registry), call_over(prefix(3), "tell me more"), r.lease)
    assert len(chunks) == 3
    assert all(info is None and c.usage is None for c, info in chunks[:-1])
    last, info = chunks[-1]
    assert info is not None and info.state is CacheState.CREATED
    assert last.usage is not None and last.usage.cached_prompt_tokens == info.prefix_tokens
    text = "".join(c.content["parts"][0]["text"] for c, _ in chunks)
    reply, _ = await Generator(h.registry).generate(scope(), call_over(prefix(3), "tell me more"), "")
    assert text == reply.content["parts"][0]["text"]  # type: ignore[index]


async def test_streamed_calls_have_a_span_that_ends_however_the_stream_does(h, span_exporter) -> None:
    r = await h.acquire(prefix(3))
    gen = Generator(h.registry)
    span_exporter.clear()
    chunks = await _stream(gen, call_over(prefix(3), "tell me more"), r.lease)
    # Abandoned by its consumer after one chunk: the span still ends.
    stream = gen.stream(scope(), call_over(prefix(3)), r.lease)
    await anext(stream)
    await stream.aclose()
    # A lost cache, retried uncached before anything was streamed.
    h.provider.lose_caches()
    await _stream(gen, call_over(prefix(3)), r.lease)
    spans = [s for s in span_exporter.get_finished_spans() if s.name == "cache.generate"]
    assert [s.attributes["cache.chunks"] for s in spans] == [len(chunks), 1, 3]
    assert all(s.attributes["cache.streamed"] and s.attributes["cache.leased"] for s in spans)
    assert [bool(s.attributes.get("cache.missing_retry")) for s in spans] == [False, False, True]


def _scripted_stream(h, chunks: list[ModelReply], gate: asyncio.Event) -> None:  # type: ignore[no-untyped-def]
    """The provider streams ``chunks``, waiting on ``gate`` after the first."""

    async def stream(call, cached):  # type: ignore[no-untyped-def]
        for i, chunk in enumerate(chunks):
            if i == 1:
                await gate.wait()
            yield chunk

    h.provider.stream_generate = stream


async def test_a_chunk_reaches_the_caller_before_the_provider_sends_the_next(h) -> None:
    """Time to first token: only a chunk that may be the last is held back."""
    r = await h.acquire(prefix(3))
    gate = asyncio.Event()
    text = {"role": "model", "parts": [{"text": "hel"}]}
    _scripted_stream(h, [ModelReply(content=text, model_version="v1"),
                         ModelReply(content={"role": "model", "parts": [{"text": "lo"}]}, finish_reason="STOP",
                                    usage=Usage(prompt_tokens=9, output_tokens=2), model_version="v1")], gate)
    stream = Generator(h.registry).stream(scope(), call_over(prefix(3)), r.lease)
    first, info = await asyncio.wait_for(anext(stream), 2)  # the provider is still holding the second chunk
    assert first.content == text and info is None
    gate.set()
    rest = [item async for item in stream]
    assert len(rest) == 1 and rest[0][0].finish_reason == "STOP" and rest[0][1] is not None


async def test_a_stream_without_a_final_chunk_ends_with_a_content_free_one_carrying_the_cache_info(h) -> None:
    r = await h.acquire(prefix(3))
    gate = asyncio.Event()
    gate.set()
    _scripted_stream(h, [ModelReply(content={"role": "model", "parts": [{"text": t}]}, model_version="v2")
                         for t in ("a", "b")], gate)
    items = [item async for item in Generator(h.registry).stream(scope(), call_over(prefix(3)), r.lease)]
    assert [c.content for c, _ in items[:2]] == [{"role": "model", "parts": [{"text": t}]} for t in ("a", "b")]
    last, info = items[-1]
    assert len(items) == 3 and last.content is None and last.model_version == "v2"
    assert info is not None and info.state is CacheState.CREATED
