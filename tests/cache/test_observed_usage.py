"""Usage and cache states as the providers report them (issue 21, points
6 to 9): the pure parts (domain.observed, the Anthropic breakpoint bridges,
the minimum-prefix table, OpenAI's write prices), then each adapter through
its real SDK against the strict fakes in tests/fakes/."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anthropic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cache_service.domain.clock import ManualClock
from cache_service.domain.generation import Generator
from cache_service.domain.keys import Prefix, PrefixView
from cache_service.domain.model import AcquireResult, BypassReason, CacheInfo, CacheState, ModelCall, Usage
from cache_service.domain.observed import learned_floor, marked_tokens, observe
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import CacheKind, PrefixMark
from cache_service.domain.pricing import OPENAI, OPENAI_WRITES, Bill, cache_prices, openai_reports_writes
from cache_service.providers.anthropic import wire
from cache_service.providers.anthropic.adapter import AnthropicProvider
from cache_service.providers.anthropic.settings import default_min_cache_tokens
from cache_service.providers.anthropic.wire import bridges
from cache_service.providers.openai.adapter import OpenAIProvider
from tests.cache.support import SYSTEM, Harness, scope
from tests.fakes.anthropic_server import FakeAnthropic, model_minimum
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI

# --- pure parts -----------------------------------------------------------------------

_STATES = st.sampled_from(list(CacheState))
_USAGE = st.builds(Usage, prompt_tokens=st.integers(0, 10_000), cached_prompt_tokens=st.integers(0, 10_000),
                   cache_write_tokens=st.integers(0, 10_000))


@given(st.sampled_from(list(CacheKind)), _USAGE, _STATES, st.integers(0, 10_000), st.booleans())
def test_observe_changes_only_what_the_provider_reported(kind: CacheKind, usage: Usage, state: CacheState,
                                                         tokens: int, creator: bool) -> None:
    info = CacheInfo(state=state, prefix_tokens=tokens, expire_time=5.0, uses=2)
    seen = observe(kind, usage, info, tokens, creator=creator)
    assert seen.usage is not None
    assert (seen.usage.prompt_tokens, seen.usage.cached_prompt_tokens) == (usage.prompt_tokens,
                                                                           usage.cached_prompt_tokens)
    cached = state in (CacheState.CREATED, CacheState.GROWN, CacheState.HIT)
    # Only a MARKED call that wrote and read nothing was below the floor; one that did either is above it.
    cached_nothing = usage.cache_write_tokens == 0 and usage.cached_prompt_tokens == 0
    assert seen.below_floor == (cached and kind is CacheKind.MARKED and cached_nothing)
    assert seen.above_floor == (cached and kind is CacheKind.MARKED and not cached_nothing)
    # A named create's lease serving a later call: that call read the cache.
    named_create = kind is CacheKind.NAMED and state in (CacheState.CREATED, CacheState.GROWN)
    if seen.below_floor:
        assert (seen.info.state, seen.info.bypass_reason, seen.info.expire_time) == (
            CacheState.BYPASS, BypassReason.BELOW_MIN_TOKENS, None)
    elif named_create and not creator:
        assert seen.info == replace(info, state=CacheState.HIT)
    else:
        assert seen.info == info
    # Only the call that created or grew a named cache reports its size as written.
    named_write = named_create and creator
    assert seen.usage.cache_write_tokens == usage.cache_write_tokens + (tokens if named_write else 0)
    assert observe(kind, None, info, tokens).info == info


def test_a_named_create_is_written_once_however_many_calls_its_lease_serves() -> None:
    usage = Usage(prompt_tokens=900, cached_prompt_tokens=800)
    created = CacheInfo(state=CacheState.CREATED, prefix_tokens=800, uses=1)
    first = observe(CacheKind.NAMED, usage, created, 800, creator=True)
    later = observe(CacheKind.NAMED, usage, created, 800, creator=False)
    assert first.usage is not None and later.usage is not None
    assert (first.usage.cache_write_tokens, first.info.state) == (800, CacheState.CREATED)
    assert (later.usage.cache_write_tokens, later.info.state) == (0, CacheState.HIT)


def test_the_learned_floor_is_above_what_the_call_marked() -> None:
    assert learned_floor(2000, 2750, write_through=True) == 2751
    assert learned_floor(2000, 2750, write_through=False) == 2001
    assert marked_tokens(2000, 2750, write_through=True) == 2750
    assert marked_tokens(2000, 2750, write_through=False) == 2000


def test_anthropic_minimums_are_the_documented_ones() -> None:
    for model in ("claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7", "claude-haiku-4-5-20251001",
                  "claude-opus-4-5-20251101"):
        assert default_min_cache_tokens(model) == model_minimum(model) == 4096, model
    for model in ("claude-3-haiku-20240307", "claude-3-5-haiku-20241022"):
        assert default_min_cache_tokens(model) == 2048, model
    for model in ("claude-sonnet-4-5", "claude-sonnet-4-6", "claude-sonnet-4-20250514", "claude-opus-4-1",
                  "claude-opus-4-20250514", "claude-3-7-sonnet-latest", "claude-opus-4-8"):
        assert default_min_cache_tokens(model) == 1024, model


def test_openai_writes_cost_a_quarter_more_than_input_where_reported() -> None:
    assert [openai_reports_writes(m) for m in ("gpt-5", "gpt-5-mini", "gpt-5.5", "gpt-5.6", "gpt-5.6-mini",
                                               "gpt-6", "o3")] == [False, False, False, True, True, True, False]
    assert cache_prices("automatic", model="gpt-5-mini").write == OPENAI.input_per_mtok
    assert cache_prices("automatic", model="gpt-5.6").write == pytest.approx(1.25 * OPENAI.input_per_mtok)
    bill = Bill(input_tokens=0, cache_write_tokens=1_000_000)
    assert bill.cost(OPENAI_WRITES) == pytest.approx(1.25 * bill.cost(OPENAI))


_SIZES = st.lists(st.integers(1, 30), min_size=1, max_size=12)


@given(_SIZES.flatmap(lambda sizes: st.tuples(st.just(sizes), st.lists(st.booleans(), min_size=len(sizes),
                                                                        max_size=len(sizes)),
                                              st.sets(st.integers(1, len(sizes)), max_size=2))),
       st.integers(0, 3))
def test_bridges_stay_within_the_room_and_between_breakpoints(case: Any, room: int) -> None:
    sizes, replies, ends = case
    added = bridges(sizes, replies, ends, room)
    assert len(added) <= room and not added & ends
    assert all(0 < b < max(ends) and replies[b] for b in added)


def test_a_turn_of_parallel_tool_calls_gets_a_bridge_to_the_previous_end() -> None:
    # ... user (the previous request's end), 25 tool calls, 25 results.
    sizes, replies = [1, 1, 1, 25, 25], [False, True, False, True, False]
    assert bridges(sizes, replies, {4, 5}, 1) == {3}  # the lease ends after the reply
    assert bridges(sizes, replies, {2, 5}, 1) == {3}  # an older lease: bridge before the reply
    assert bridges(sizes, replies, {2, 5}, 0) == set()
    assert bridges([1, 1, 1, 2, 3], replies, {4, 5}, 1) == set()  # within the lookback


# --- helpers for the SDK tests ---------------------------------------------------------

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = ({"functionDeclarations": [{"name": "get_weather", "description": "Weather of a city.", "parameters": PARAMS}]},)


def _text(n: int, word: str = "word") -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": " ".join(f"{word}{i}" for i in range(n))}]}


async def _harness(factory: Callable[..., Any], provider: Any, **policy: Any) -> Harness:
    h: Harness = await factory(provider=provider, live=lambda: set(), harness_clock=ManualClock(start_wall=time.time()),
                               policy=PolicySettings(min_prefix_tokens=64, sightings_before_create=0, **policy))
    return h


# --- OpenAI: cache_write_tokens ----------------------------------------------------------


@pytest.mark.parametrize("model", ["gpt-5.6", "gpt-5-mini"])
async def test_openai_reports_the_writes_of_the_models_that_bill_them(harness_factory: Callable[..., Any],
                                                                     model: str) -> None:
    history = (_text(200), {"role": "model", "parts": [{"text": "Noted."}]})
    with FakeOpenAI(min_cache_tokens=64) as fake:
        provider = OpenAIProvider(api_key=fake.api_key, base_url=f"{fake.base_url}/v1", min_cache_tokens=64)
        try:
            gen = Generator((await _harness(harness_factory, provider)).registry)
            s = scope(model=model, provider="openai")
            first, _ = await gen.generate(s, ModelCall(model, (*history, _text(3, "q")), SYSTEM), "")
            second, _ = await gen.generate(s, ModelCall(model, (*history, _text(4, "r")), SYSTEM), "")
        finally:
            await provider.close()
    assert first.usage is not None and second.usage is not None
    assert first.usage.cached_prompt_tokens == 0 and 0 < second.usage.cached_prompt_tokens
    if openai_reports_writes(model):
        assert first.usage.cache_write_tokens == first.usage.prompt_tokens
        assert second.usage.cache_write_tokens == second.usage.prompt_tokens - second.usage.cached_prompt_tokens
    else:
        assert first.usage.cache_write_tokens == second.usage.cache_write_tokens == 0


# --- Gemini: a create's tokens on the call that created it ------------------------------


GEMINI = "gemini-2.5-flash"
_GEMINI_HISTORY = (_text(120), {"role": "model", "parts": [{"text": "Noted."}]})


async def _gemini_created(h: Harness) -> tuple[Any, AcquireResult]:
    """A Gemini scope and the CREATED lease on its prefix."""
    s = scope(model=GEMINI, provider="gemini")
    created = await h.acquire(PrefixView.of(Prefix(GEMINI, SYSTEM, (), None, _GEMINI_HISTORY)), s)
    assert created.info.state is CacheState.CREATED
    return s, created


async def test_a_gemini_create_is_written_on_the_call_that_created_it(gemini_harness: Harness,
                                                                      fake_gemini: FakeGemini) -> None:
    model, history = GEMINI, _GEMINI_HISTORY
    s, created = await _gemini_created(gemini_harness)
    gen = Generator(gemini_harness.registry)
    call = ModelCall(model, (*history, _text(3, "q")), SYSTEM)
    reply, info = await gen.generate(s, call, created.lease)
    [cache] = fake_gemini.caches.values()
    assert reply.usage is not None and info.state is CacheState.CREATED
    assert reply.usage.cache_write_tokens == cache.tokens == reply.usage.cached_prompt_tokens
    hit = await gemini_harness.acquire(PrefixView.of(Prefix(model, SYSTEM, (), None, history)), s)
    assert hit.info.state is CacheState.HIT
    again, _ = await gen.generate(s, call, hit.lease)
    assert again.usage is not None and again.usage.cache_write_tokens == 0
    # Streamed, the last chunk carries it.
    other = (_text(130, "other"), {"role": "model", "parts": [{"text": "Noted."}]})
    grown = await gemini_harness.acquire(PrefixView.of(Prefix(model, SYSTEM, (), None, other)), s)
    assert grown.info.state is CacheState.CREATED
    chunks = [c async for c, _ in gen.stream(s, ModelCall(model, (*other, _text(3, "q")), SYSTEM), grown.lease)]
    assert chunks[-1].usage is not None and chunks[-1].usage.cache_write_tokens == grown.info.prefix_tokens > 0


async def test_a_gemini_create_lease_serving_several_calls_writes_once(gemini_harness: Harness,
                                                                       fake_gemini: FakeGemini) -> None:
    s, created = await _gemini_created(gemini_harness)
    gen, admission = Generator(gemini_harness.registry), gemini_harness.registry.admission
    writes, states, balances = [], [], []
    for question in ("q", "r", "s"):
        call = ModelCall(GEMINI, (*_GEMINI_HISTORY, _text(3, question)), SYSTEM)
        if question == "s":  # streamed, the last chunk carries it
            reply, info = [(c, i) async for c, i in gen.stream(s, call, created.lease)][-1]
        else:
            reply, info = await gen.generate(s, call, created.lease)
        assert reply.usage is not None and info is not None and reply.usage.cached_prompt_tokens > 0
        writes.append(reply.usage.cache_write_tokens)
        states.append(info.state)
        balances.append(await admission.balance(s.fingerprint))
    [cache] = fake_gemini.caches.values()
    # One create, written on the call that made it; the lease's later calls read it.
    assert writes == [cache.tokens, 0, 0] and cache.tokens > 0
    assert states == [CacheState.CREATED, CacheState.HIT, CacheState.HIT]
    # The scope's loss account books the write (and its storage) once: the later reads only gain.
    assert balances[0] < balances[1] < balances[2]


# --- Anthropic: the state from usage, and learned floors ---------------------------------

OPUS = "claude-opus-4-6"


def _opus_history() -> tuple[dict[str, Any], ...]:
    # About 2,750 tokens (JSON bytes / 4): over 1,024, under Opus 4.6's 4,096.
    return (_text(1500), {"role": "model", "parts": [{"text": "Noted."}]})


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_marked_call_below_the_floor_is_no_cache_and_teaches_the_floor(
        harness_factory: Callable[..., Any], streamed: bool) -> None:
    # The provider's table says 1,024 (as the old one did for Opus 4.6); the
    # fake applies the documented 4,096: the call writes and reads nothing.
    with FakeAnthropic(min_cache_tokens=None) as fake:
        provider = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url, min_cache_tokens=1024)
        try:
            h = await _harness(harness_factory, provider)
            s = scope(model=OPUS, provider="anthropic")
            view = PrefixView.of(Prefix(OPUS, SYSTEM, (), None, _opus_history()))
            assert 1024 < view.tokens < 4096
            created = await h.acquire(view, s)
            assert created.info.state is CacheState.CREATED
            gen = Generator(h.registry)
            call = ModelCall(OPUS, (*_opus_history(), _text(3, "q")), SYSTEM)
            if streamed:
                chunks = [c async for c in gen.stream(s, call, created.lease)]
                reply, info = chunks[-1][0], chunks[-1][1]
            else:
                reply, info = await gen.generate(s, call, created.lease)
            assert reply.usage is not None
            assert (reply.usage.cache_write_tokens, reply.usage.cached_prompt_tokens) == (0, 0)
            assert info is not None and (info.state, info.bypass_reason) == (CacheState.BYPASS,
                                                                              BypassReason.BELOW_MIN_TOKENS)
            assert await h.registry.entries() == []
            floor = await h.registry.store.learned_floor("anthropic", OPUS, h.clock.wall())
            full = PrefixView.of(Prefix.of_call(call, len(call.contents))).tokens
            assert floor == full + 1  # it wrote through: the whole request was below
            # The next acquire knows: no lease, no breakpoint sent.
            after = await h.acquire(view, s)
            assert (after.info.state, after.info.bypass_reason) == (CacheState.BYPASS, BypassReason.BELOW_MIN_TOKENS)
            # Not for ever: a day later the floor has expired, and the prefix is tried again.
            h.clock.advance(h.registry.settings.learned_floor_keep_s)
            assert await h.registry.store.learned_floor("anthropic", OPUS, h.clock.wall()) == 0
            assert (await h.acquire(view, s)).info.state is CacheState.CREATED
        finally:
            await provider.close()


async def test_a_marked_call_that_caches_lowers_a_floor_learned_above_it(harness_factory: Callable[..., Any]) -> None:
    model = "claude-sonnet-4-5"  # 1,024 tokens, as the provider's table says
    with FakeAnthropic(min_cache_tokens=None) as fake:
        provider = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url)
        try:
            h = await _harness(harness_factory, provider)
            store, s = h.registry.store, scope(model=model, provider="anthropic")
            view = PrefixView.of(Prefix(model, SYSTEM, (), None, _opus_history()))
            created = await h.acquire(view, s)
            assert created.info.state is CacheState.CREATED
            # Meanwhile an odd call (on this replica or another) taught a floor above the prefix.
            await store.learn_floor("anthropic", model, 8000, h.clock.wall(), 86400.0)
            call = ModelCall(model, (*_opus_history(), _text(3, "q")), SYSTEM)
            reply, info = await Generator(h.registry).generate(s, call, created.lease)
            assert reply.usage is not None and reply.usage.cache_write_tokens > 0
            assert info.state is CacheState.CREATED
            # The provider cached what the call marked (it wrote through: the whole request).
            full = PrefixView.of(Prefix.of_call(call, len(call.contents))).tokens
            assert await store.learned_floor("anthropic", model, h.clock.wall()) == full
            # So another conversation's first call, as large, is cached again rather than sent plain.
            other = scope(model=model, provider="anthropic", user="user-2")
            again = await h.registry.acquire(other, view, None, None, "", full)
            assert again.info.state is CacheState.CREATED
        finally:
            await provider.close()


async def test_a_marked_call_above_the_floor_keeps_its_state(harness_factory: Callable[..., Any]) -> None:
    model = "claude-sonnet-4-5"
    with FakeAnthropic(min_cache_tokens=None) as fake:
        provider = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url)
        try:
            h = await _harness(harness_factory, provider)
            s = scope(model=model, provider="anthropic")
            history = _opus_history()
            created = await h.acquire(PrefixView.of(Prefix(model, SYSTEM, (), None, history)), s)
            reply, info = await Generator(h.registry).generate(
                s, ModelCall(model, (*history, _text(3, "q")), SYSTEM), created.lease)
            assert reply.usage is not None and reply.usage.cache_write_tokens > 0
            assert info.state is CacheState.CREATED and len(await h.registry.entries()) == 1
            assert await h.registry.store.learned_floor("anthropic", model, h.clock.wall()) == 0
        finally:
            await provider.close()


# --- Anthropic: 20-block lookback -------------------------------------------------------


def _parallel_turn(k: int) -> tuple[dict[str, Any], ...]:
    calls = [{"functionCall": {"id": f"c{i}", "name": "get_weather", "args": {"city": f"City{i}"}}} for i in range(k)]
    results = [{"functionResponse": {"id": f"c{i}", "name": "get_weather", "response": {"sky": "clear"}}}
               for i in range(k)]
    return ({"role": "model", "parts": calls}, {"role": "user", "parts": results})


async def _two_turns(first: ModelCall, second: ModelCall) -> tuple[Usage, Usage, list[int]]:
    """The two calls through the adapter, each writing through; the second's
    lease ends after the model's reply (as a grown entry does)."""
    with FakeAnthropic(min_cache_tokens=64) as fake:
        provider = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url, min_cache_tokens=64)
        try:
            one = await provider.generate(first, PrefixMark(len(first.contents) - 1, 300, "k", write_through=True))
            two = await provider.generate(second, PrefixMark(len(second.contents) - 1, 300, "k", write_through=True))
        finally:
            await provider.close()
    body = fake.calls_of("generate")[1].body
    marked = [i for i, m in enumerate(body["messages"]) if any("cache_control" in b for b in m["content"])]
    assert one.usage is not None and two.usage is not None
    return one.usage, two.usage, marked


async def test_a_turn_of_25_parallel_tool_calls_still_reads_the_previous_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = "claude-sonnet-4-5"
    first = ModelCall(model, (_text(300), {"role": "model", "parts": [{"text": "ok"}]}, _text(5, "go")), SYSTEM,
                      TOOLS)
    second = ModelCall(model, (*first.contents, *_parallel_turn(25)), SYSTEM, TOOLS)
    one, two, marked = await _two_turns(first, second)
    # The bridge at the previous request's end, the lease, the end (and the head: 4).
    assert marked == [2, 3, 4]
    assert two.cached_prompt_tokens == one.prompt_tokens
    # Without the bridge the lookback misses it: only the head is read.
    monkeypatch.setattr(wire, "bridges", lambda *_: set())
    _, unbridged, marked = await _two_turns(first, second)
    assert marked == [3, 4] and unbridged.cached_prompt_tokens < one.prompt_tokens // 2
    # A turn within the lookback needs no bridge.
    monkeypatch.undo()
    short = ModelCall(model, (*first.contents, *_parallel_turn(3)), SYSTEM, TOOLS)
    one, two, marked = await _two_turns(first, short)
    assert marked == [3, 4] and two.cached_prompt_tokens >= one.prompt_tokens


# --- the fakes refuse what Anthropic refuses ---------------------------------------------


async def test_the_anthropic_fake_refuses_five_breakpoints_and_an_hour_after_five_minutes() -> None:
    short, hour = {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}

    def request(system: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": "claude-sonnet-4-5", "max_tokens": 16, "system": [{"type": "text", "text": "sys", **system}],
                "messages": [{"role": "user", "content": blocks}]}

    with FakeAnthropic() as fake:
        client = anthropic.AsyncAnthropic(api_key=fake.api_key, base_url=fake.base_url, max_retries=0)
        try:
            five = [{"type": "text", "text": f"part {i}", "cache_control": short} for i in range(4)]
            with pytest.raises(anthropic.BadRequestError) as too_many:
                await client.messages.create(**request({"cache_control": short}, five))
            # Tools, system, then messages: an hour after five minutes is refused.
            later = [{"type": "text", "text": "hi", "cache_control": hour}]
            with pytest.raises(anthropic.BadRequestError) as order:
                await client.messages.create(**request({"cache_control": short}, later))
            ok = await client.messages.create(**request({"cache_control": hour},
                                                        [{"type": "text", "text": "hi", "cache_control": short}]))
        finally:
            await client.close()
    for err in (too_many.value, order.value):
        assert err.status_code == 400
        assert isinstance(err.body, dict) and err.body["type"] == "error"
        assert err.body["error"]["type"] == "invalid_request_error"
    assert "maximum of 4 blocks" in too_many.value.message and "ttl='1h'" in order.value.message
    assert ok.stop_reason == "end_turn"
