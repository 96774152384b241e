"""The demo against a real pair in this process: it runs to completion,
the cache and compaction do what its screen says, and its accounting agrees
with the simulator's own bill."""

from __future__ import annotations

import argparse
import asyncio
import io
import pathlib
import re
import subprocess
from collections.abc import AsyncIterator

import pytest

from agentctx_cli.demo import pricing
from agentctx_cli.demo.display import Screen, story
from agentctx_cli.demo.pricing import TurnCost
from agentctx_cli.demo.runner import DemoResult, TurnRecord, run_demo
from agentctx_cli.demo.show import show_demo
from agentctx_client import ContextClient
from cache_service.domain.pricing import ANTHROPIC, GEMINI, OPENAI, Bill, Pricing
from cache_service.providers.local import LocalProvider
from tests.support.pair import ServicePair, start_pair


@pytest.fixture
async def pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    p = await start_pair(certs_dir, tmp_path)
    yield p
    await p.close()


def _conn(pair: ServicePair) -> argparse.Namespace:
    return argparse.Namespace(target=f"127.0.0.1:{pair.context.port}", certs=pair.certs, client="agent-client",
                              server_name="localhost")


async def test_a_short_demo_prints_every_call_and_a_summary(pair: ServicePair) -> None:
    out = io.StringIO()
    result = await show_demo(_conn(pair), 8, out, color=False, progress=False)
    text = out.getvalue()
    assert len(result.turns) == 8
    rows = [line for line in text.splitlines() if re.match(r"^\s+\d+ ", line)]
    assert [int(r.split()[0]) for r in rows] == list(range(1, 9))
    assert "bypass: first seen" in rows[0] and "created" in rows[1]
    assert "Summary: 8 model calls" in text and "with agentctx" in text and "without a cache" in text
    program = text.split(" inspect context-lifecycle")[0].split()[-1]
    ran = await asyncio.to_thread(subprocess.run, [program, "--help"], capture_output=True)
    assert ran.returncode == 0  # runs as printed
    # A shell command continued over lines of at most 80 columns.
    assert (f"{program} inspect context-lifecycle \\ demo newcomer {result.session_id} \\ "
            f"--target 127.0.0.1:{pair.context.port} \\ --certs {pair.certs}") in " ".join(text.split())
    assert "\033[" not in text  # no terminal, no escape codes


async def test_the_default_demo_caches_most_tokens_compacts_and_halves_the_bill(pair: ServicePair) -> None:
    result = await run_demo(ContextClient(pair.channel), turns=30)
    states = [t.cache_state for t in result.turns]
    assert len(states) == 30
    assert states[0] == "bypass" and result.turns[0].bypass_reason == "first sighting"
    assert states.count("bypass") == 1 and "off" not in states
    assert {"created", "hit", "grown"} <= set(states)
    assert result.compactions, "the demo's budget is small enough for compaction to happen"
    assert any(t.input_kind == "tool" for t in result.turns)
    assert result.cached_share >= 0.75
    assert result.cost <= 0.6 * result.uncached_cost
    assert max(t.secrets_pruned for t in result.turns) >= 1


async def test_the_demo_accounting_matches_the_simulator_bill(pair: ServicePair) -> None:
    result = await run_demo(ContextClient(pair.channel), turns=12)
    bill = pair.provider.bill()
    assert bill.calls == 12
    assert bill.cached_tokens == result.cached_tokens
    assert bill.input_tokens == result.prompt_tokens - result.cached_tokens
    assert bill.output_tokens == sum(t.output_tokens for t in result.turns)
    # The demo charges storage for each cache's whole TTL: never less than
    # what the simulator billed so far.
    assert result.cost >= bill.cost() > 0


@pytest.mark.parametrize(("shape", "simulator"), [(pricing.ANTHROPIC, "local-anthropic"),
                                                  (pricing.OPENAI, "local-openai")])
async def test_the_demo_runs_in_each_provider_shape_and_its_bill_is_the_simulators(
    pair: ServicePair, shape: pricing.Shape, simulator: str
) -> None:
    result = await run_demo(ContextClient(pair.channel), turns=30, shape=shape)
    provider = pair.cache_app.providers[simulator]
    assert isinstance(provider, LocalProvider)
    bill = provider.bill()
    assert bill.calls == 30 and pair.provider.bill().calls == 0  # routed by the model name alone
    assert bill.cached_tokens == result.cached_tokens > 0
    assert bill.output_tokens == sum(t.output_tokens for t in result.turns)
    # No storage on these shapes, and the writes are reported per call: the
    # demo's bill is the simulator's to the cent.
    assert result.cost == pytest.approx(bill.cost(ANTHROPIC if shape is pricing.ANTHROPIC else OPENAI))
    assert result.cost < 0.7 * result.uncached_cost
    assert result.shape is shape and shape.model in " ".join(story(result))


@pytest.mark.parametrize(("shape", "simulated"), [(pricing.GEMINI, GEMINI), (pricing.ANTHROPIC, ANTHROPIC),
                                                   (pricing.OPENAI, OPENAI)])
def test_the_demo_prices_are_the_simulator_prices(shape: pricing.Shape, simulated: Pricing) -> None:
    write = simulated.cache_write_per_mtok
    assert (shape.input_per_mtok, shape.cached_input_per_mtok, shape.storage_per_mtok_hour, shape.output_per_mtok,
            shape.write_per_mtok) == (simulated.input_per_mtok, simulated.cached_input_per_mtok,
                                      simulated.storage_per_mtok_hour, simulated.output_per_mtok, write)


def test_the_gemini_turn_cost_is_the_bill() -> None:
    cost = pricing.turn_cost(prompt_tokens=5000, cached_tokens=4000, output_tokens=100, written_tokens=3000,
                             cache_ttl_s=3600)
    bill = Bill(input_tokens=1000, cached_tokens=4000, cache_write_tokens=3000, storage_token_hours=3000,
                output_tokens=100)
    assert cost.with_cache == pytest.approx(bill.cost())
    assert cost.without_cache == pytest.approx(Bill(input_tokens=5000, output_tokens=100).cost())


def test_on_a_terminal_a_progress_bar_follows_the_last_row() -> None:
    out = io.StringIO()
    screen = Screen(out, color=True, progress=True, total=4)
    record = TurnRecord(1, "user", "hello", 100, 0, 5, "bypass", "first sighting", (), False, 0, TurnCost(0.1, 0.1))
    screen.row(record)
    screen.row(TurnRecord(2, "tool", "x", 150, 100, 5, "created", "", ("threshold",), False, 0, TurnCost(0.1, 0.2)))
    text = out.getvalue()
    assert text.count("/4 calls") == 2 and "\r\033[K" in text  # the bar is redrawn, not repeated
    assert "\033[31mbypass: first seen" in text and "\033[35mthreshold" in text
    screen.summary(DemoResult("s", "s", [record]), ["hint \\", "    more"])
    assert out.getvalue().endswith("  hint \\\n      more\n")


_ANSI = re.compile(r"\033\[[0-9;]*[A-Za-z]")


async def test_every_line_of_the_demo_fits_80_columns(pair: ServicePair) -> None:
    out = io.StringIO()
    await show_demo(_conn(pair), 30, out, color=True, progress=True)
    lines = [_ANSI.sub("", part) for line in out.getvalue().split("\n") for part in line.split("\r")]
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)


async def test_a_replay_tells_what_happened_in_it(pair: ServicePair) -> None:
    await show_demo(_conn(pair), 6, io.StringIO(), color=False, progress=False)
    out = io.StringIO()
    replay = await show_demo(_conn(pair), 6, out, color=False, progress=False)
    text = " ".join(out.getvalue().split("What happened:")[1].split("See the session")[0].split())
    first = replay.turns[0]
    assert first.cache_state != "bypass"  # the scope's cache is warm from the first run
    assert "first sighting" not in text
    created = [t.number for t in replay.turns if t.cache_state == "created"]
    if first.cache_state == "hit":
        assert "Call 1 hit a cache at once" in text
    assert ("created at call " + ", ".join(map(str, created)) in text) if len(created) == 1 else True
    assert f"{replay.count('hit')} calls then read their prefix from a cache" in text


def _record(n: int, state: str, prompt: int, *, reason: str = "", compactions: tuple[str, ...] = ()) -> TurnRecord:
    return TurnRecord(n, "user", "x", prompt, 0, 5, state, reason, compactions, False, 0, TurnCost(0.0, 0.0))


def test_the_story_follows_the_calls() -> None:
    turns = [_record(1, "bypass", 1000, reason="first sighting"), _record(2, "created", 1500),
             _record(3, "hit", 7200, compactions=("threshold",)), _record(4, "created", 3100),
             _record(5, "grown", 3900), _record(6, "bypass", 4000, reason="rate limited")]
    text = " ".join(story(DemoResult("s", "s", turns)))
    assert text.startswith("Call 1 only recorded its prefix (a first sighting). A cache was created at calls 2 and 4.")
    assert "1 call then read their prefix from a cache; it grew at call 5" in text
    assert "At call 3 the history (7,200 prompt tokens) passed" in text
    assert "call 4's prompt was 3,100 tokens, and caching started over" in text
    assert "1 call went without a cache: 1 for a rate-limited create." in text
    assert story(DemoResult("s", "s", [])) == ["No model call was made."]
