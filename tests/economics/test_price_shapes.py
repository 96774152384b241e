"""The simulator's three cache kinds and price shapes that bench/economics
runs on: what a marked and an automatic call read and write, the bench's
naive clients, and the bill at each shape's prices."""

from __future__ import annotations

from typing import Any

import pytest

from bench.economics import RecordingProvider
from cache_service.domain.clock import ManualClock
from cache_service.domain.model import ModelCall
from cache_service.domain.ports import CacheKind, PrefixMark
from cache_service.domain.pricing import ANTHROPIC, GEMINI, OPENAI, Bill
from cache_service.providers.local import LocalProvider

SYSTEM = {"role": "user", "parts": [{"text": "You are a careful agent. " * 40}]}


def _call(model: str, turns: int, who: str = "") -> ModelCall:
    """Call ``turns`` of one conversation: the previous call, its reply and
    a new input (so each call extends the one before)."""
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": f"{who} step 0: " + "detail " * 60}]}]
    for i in range(1, turns + 1):
        contents.append({"role": "model", "parts": [{"text": f"done {i}: " + "result " * 60}]})
        contents.append({"role": "user", "parts": [{"text": f"step {i}: " + "detail " * 60}]})
    return ModelCall(model, tuple(contents), SYSTEM)


def test_the_bill_prices_writes_by_shape() -> None:
    bill = Bill(input_tokens=1_000_000, cached_tokens=1_000_000, cache_write_tokens=2_000_000,
                cache_write_long_tokens=1_000_000)
    # Anthropic: input 3, read 0.3, a 5-minute write 3.75, an hour's 6.
    assert bill.cost(ANTHROPIC) == pytest.approx(3 + 0.3 + 3.75 + 6)
    # OpenAI and Gemini bill a write as input.
    assert bill.cost(OPENAI) == pytest.approx(1.25 + 0.125 + 2 * 1.25)
    assert bill.cost(GEMINI) == pytest.approx(0.30 + 0.03 + 2 * 0.30)


def test_the_shape_follows_the_provider_name() -> None:
    assert [LocalProvider(name=n).cache_kind for n in ("local", "local-anthropic", "local-openai")] == [
        CacheKind.NAMED, CacheKind.MARKED, CacheKind.AUTOMATIC]
    assert LocalProvider(name="local-anthropic").pricing == ANTHROPIC
    assert LocalProvider(name="local-anthropic").named_caches is None
    assert LocalProvider(name="local-anthropic").prefix_ttl_s(1800) == 3600


async def test_a_marked_conversation_writes_through_and_reads_it_all_back() -> None:
    sim = LocalProvider(name="local-anthropic", clock=ManualClock(), min_cache_tokens=64)
    model = "local-sim-anthropic-1"
    one, two = _call(model, 1), _call(model, 2)
    first = (await sim.generate(one, PrefixMark(1, 300, "k", write_through=True))).usage
    assert first is not None and (first.cached_prompt_tokens, first.cache_write_tokens) == (0, first.prompt_tokens)
    # The next call of the conversation reads the whole previous request.
    second = (await sim.generate(two, PrefixMark(3, 300, "k", write_through=True))).usage
    assert second is not None and second.cached_prompt_tokens == first.prompt_tokens
    assert second.cache_write_tokens == second.prompt_tokens - second.cached_prompt_tokens
    # Without write-through only the leased prefix is written: the input after it is plain.
    sim2 = LocalProvider(name="local-anthropic", clock=ManualClock(), min_cache_tokens=64)
    held = (await sim2.generate(two, PrefixMark(3, 300, "k"))).usage
    assert held is not None and 0 < held.cache_write_tokens < held.prompt_tokens
    # Unmarked: nothing read or written; an hour-long write is priced apart.
    plain = (await sim.generate(_call(model, 3), None)).usage
    assert plain is not None and (plain.cached_prompt_tokens, plain.cache_write_tokens) == (0, 0)
    await sim.generate(_call(model, 4), PrefixMark(7, 3600, "k", write_through=True))
    assert 0 < sim.bill().cache_write_long_tokens < sim.bill().cache_write_tokens


async def test_the_naive_anthropic_client_marks_every_request_end() -> None:
    naive = RecordingProvider(name="local-anthropic", clock=ManualClock(), min_cache_tokens=64, naive=True)
    model = "local-sim-anthropic-1"
    one = _call(model, 1)
    assert naive.marks(one, None) == (len(one.contents),)
    first = (await naive.generate(one, None)).usage
    second = (await naive.generate(_call(model, 2), None)).usage
    assert first is not None and second is not None
    assert (first.cache_write_tokens, second.cached_prompt_tokens) == (first.prompt_tokens, first.prompt_tokens)


async def _rounds(users: int, keyed: bool, rounds: int = 6) -> list[tuple[int, int]]:
    """(tokens read, tokens of the user's previous request) of every call
    after each user's first."""
    clock = ManualClock()
    sim = LocalProvider(name="local-openai", clock=clock, min_cache_tokens=64, machines=16)
    previous: dict[int, int] = {}
    out = []
    for turn in range(rounds):
        for u in range(users):
            mark: Any = PrefixMark(None, 300, f"user-{u}") if keyed else None
            usage = (await sim.generate(_call("local-sim-openai-1", turn, who=f"user {u}"), mark)).usage
            assert usage is not None
            if u in previous:
                out.append((usage.cached_prompt_tokens, previous[u]))
            previous[u] = usage.prompt_tokens
        clock.advance(20)
    return out


async def test_an_automatic_route_reads_whole_requests_when_keyed_or_light() -> None:
    for reads in (await _rounds(12, keyed=True), await _rounds(2, keyed=False)):
        assert all(read == prior for read, prior in reads)


async def test_an_automatic_route_over_its_rate_spreads_without_a_key() -> None:
    reads = await _rounds(12, keyed=False)  # 36 calls a minute on one head
    assert any(read < prior for read, prior in reads)
