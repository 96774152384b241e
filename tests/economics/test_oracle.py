"""bench.economics_oracle: the offline optimum on hand-made request
sequences (each node's dynamic programme, the provider's minimum, what a
later request may read), the bench's own code path on a few calls of its
shapes (the oracle is a lower bound on every mode's bill), and the
policy's bound against never-cache on generated workloads played through
the real service pair."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_common.certs import init_dev_certs
from bench import economics_oracle as oracle
from bench.economics import ADK_OVERRIDES
from bench.economics_shapes import Call, Workload, _words, edge_workloads, head, head_tokens, play
from cache_service.domain.policy import premium
from cache_service.domain.pricing import ANTHROPIC, GEMINI, OPENAI, cache_prices
from cache_service.settings import CacheSettings

Req = oracle.Request


def _cost(requests: list[Req], kind: str, floor: int = 0) -> float:
    pricing = {"marked": ANTHROPIC, "named": GEMINI, "automatic": OPENAI}[kind]
    return oracle.oracle_cost(requests, kind, pricing, floor) * 1e6  # USD per Mtok units


def test_a_marked_conversation_is_written_once_and_read_after() -> None:
    # The head (1,000 tokens) and the first input (500) are written by the
    # first call and read by the second; what only the second holds is plain.
    first = Req(0.0, (b"h", b"a"), (1000, 1500))
    second = Req(20.0, (b"h", b"a", b"b", b"c"), (1000, 1500, 1700, 2000))
    assert _cost([first, second], "marked") == pytest.approx(1500 * (3.75 + 0.3) + 500 * 3.0)


def test_a_marked_node_takes_the_hour_only_when_enough_reads_repay_it() -> None:
    def uses(n: int) -> list[Req]:
        return [Req(1000.0 * i, (b"h", f"x{i}".encode()), (1000, 1001)) for i in range(n)]
    head_only = [1000 * x for x in (3.0 + 3.0, 6.0 + 0.3 + 0.3)]  # plain twice; an hour's write and two reads
    assert _cost(uses(2), "marked") == pytest.approx(head_only[0] + 2 * 3.0)
    assert _cost(uses(3), "marked") == pytest.approx(head_only[1] + 3 * 3.0)


def test_nothing_is_cached_below_the_minimum_nor_read_through_a_prefix_below_it() -> None:
    small = [Req(0.0, (b"h", b"a"), (1000, 1500)), Req(20.0, (b"h", b"a", b"b"), (1000, 1500, 1800))]
    assert _cost(small, "marked", floor=4096) == pytest.approx(1800 * 3.0 + 1500 * 3.0)
    # Both requests clear the minimum, but they share only the head, which is below it: no breakpoint can end there.
    apart = [Req(0.0, (b"h", b"a"), (1000, 5000)), Req(20.0, (b"h", b"b"), (1000, 5000))]
    assert _cost(apart, "marked", floor=4096) == pytest.approx(2 * 5000 * 3.0)


def test_a_named_node_is_held_through_a_short_gap_and_dropped_after_its_last_use() -> None:
    first = Req(0.0, (b"h", b"a"), (1000, 1500))
    second = Req(20.0, (b"h", b"a", b"b"), (1000, 1500, 1600))
    held = 0.30 + 0.03 + 1.0 * 20 / 3600 + 0.03  # written and read by the first call, kept 20 s, read
    # The head: held; the first input, the first call's own last content: plain, then plain (a create would not pay).
    expected = 1000 * held + 500 * min(0.30 + 0.30, 0.30 + 0.30 + 1.0 * 20 / 3600 + 0.03) + 100 * 0.30
    assert _cost([first, second], "named") == pytest.approx(expected)


def test_a_head_below_the_minimum_is_held_per_conversation() -> None:
    """Two chats under a 1,000-token head, a 1,024-token minimum: no cache
    can hold the head apart from a chat's first input, so each chat pays
    for it (the first input's node, head included, is written beside the
    first call and read by the second). The head was once its own node,
    written once and read by both chats: a bound no cache could reach."""
    def chat(at: float, key: bytes) -> list[Req]:
        return [Req(at, (b"h", key), (1000, 1500)), Req(at + 20.0, (b"h", key, key + b"2"), (1000, 1500, 1600))]
    per_chat = 1500 * min(0.30 + 0.30, 0.30 + 0.30 + 1.0 * 20 / 3600 + 0.03) + 100 * 0.30
    assert _cost(chat(0.0, b"a") + chat(40.0, b"b"), "named", floor=1024) == pytest.approx(2 * per_chat)
    # On marks too: each chat writes its own first input with the head, and reads it once.
    marked = 1500 * (3.75 + 0.30) + 100 * 3.0
    assert _cost(chat(0.0, b"a") + chat(40.0, b"b"), "marked", floor=1024) == pytest.approx(2 * marked)


def test_an_automatic_request_reads_the_longest_prefix_touched_within_five_minutes() -> None:
    first = Req(0.0, (b"h", b"a"), (1000, 1500))
    second = Req(200.0, (b"h", b"a", b"b"), (1000, 1500, 1700))
    late = Req(600.0, (b"h", b"a", b"b", b"c"), (1000, 1500, 1700, 1900))
    expected = 1500 * 1.25 + (1500 * 0.125 + 200 * 1.25) + 1900 * 1.25
    assert _cost([first, second, late], "automatic") == pytest.approx(expected)
    assert _cost([first, second], "automatic", floor=1600) == pytest.approx(1500 * 1.25 + 1700 * 1.25)


def test_edge_heads_sit_around_the_minimum() -> None:
    shapes = {w.name: w for w in edge_workloads(4096)}
    model = "local-sim-anthropic-1"
    sizes = {name: head_tokens(*head(False, tokens=shapes[name].head_tokens, model=model), model)
             for name in ("head-below-min", "head-at-min", "head-above-min")}
    assert sizes == {"head-below-min": 4056, "head-at-min": 4096, "head-above-min": 4496}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("certs")
    init_dev_certs(path)
    return path


@pytest.mark.parametrize("provider", oracle.PROVIDERS, ids=lambda p: p.shape)
async def test_the_bench_plays_its_shapes_and_the_oracle_bounds_every_mode(provider: oracle.Provider,
                                                                           certs: pathlib.Path,
                                                                           tmp_path: pathlib.Path) -> None:
    """A few calls of two shapes through the bench's code path: every mode's
    bill is at least the oracle's."""
    cells = {}
    for shape in edge_workloads(provider.floor):
        if shape.name not in ("branching", "many-users"):
            continue
        few = Workload(shape.name, shape.calls[:7], shape.big_head, shape.own_heads, shape.head_tokens)
        cells[f"{provider.shape}/{shape.name}"] = await oracle.play_shape(provider, few, certs, tmp_path)
    for cell in cells.values():
        assert set(cell["cost_usd"]) == {*oracle.MODES, "oracle"}
        assert cell["cost_ratio_vs_oracle"] >= 1.0
        assert all(cell[f"{mode}_cost_ratio_vs_oracle"] >= 1.0 for mode in ("uncached", "always", "client"))
    worst = oracle.summary(cells)
    assert worst["worst_vs_oracle"] == max(c["cost_ratio_vs_oracle"] for c in cells.values())
    assert worst["worst_vs_naive_at"] in cells


def _workload(sessions: list[tuple[int, int, float, float, int, bool]], head_kind: int, floor: int) -> Workload:
    """Sessions of (user, calls, start, gap, input words, fork of the
    previous session of the same user), as timed calls."""
    timed: list[tuple[float, Call]] = []
    last_of: dict[int, tuple[str, float]] = {}
    for s, (user, calls, start, gap, words, fork) in enumerate(sessions):
        name = f"s{s}"
        parent = last_of.get(user) if fork else None
        begin = max(start, parent[1] + 1.0) if parent else start
        for i in range(calls):
            timed.append((begin + i * gap, Call(name, f"Step {i} of {name}: {_words('w', words)}", 0.0, f"u{user}",
                                                parent[0] if parent and i == 0 else "")))
        last_of[user] = (name, begin)
    timed.sort(key=lambda c: c[0])
    calls, now = [], 0.0
    for at, call in timed:
        calls.append(Call(call.session, call.text, at - now, call.user, call.fork))
        now = at
    return Workload("generated", tuple(calls), big_head=head_kind == 2, head_tokens=floor - 40 if head_kind == 1 else 0)


sessions = st.lists(st.tuples(st.integers(0, 1), st.integers(1, 3), st.sampled_from([0.0, 1.0, 60.0, 400.0, 3700.0]),
                              st.sampled_from([5.0, 20.0, 400.0, 3700.0]), st.sampled_from([20, 2000, 5000]),
                              st.booleans()), min_size=1, max_size=3)


@pytest.mark.parametrize("provider", oracle.PROVIDERS[:2], ids=lambda p: p.shape)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=sessions, head_kind=st.integers(0, 2))
async def test_agentctx_never_costs_more_than_uncached_beyond_its_bound(provider: oracle.Provider, plan: list[Any],
                                                                       head_kind: int, certs: pathlib.Path,
                                                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    """On any generated workload: cost(agentctx) <= cost(uncached) x (1 +
    loss_tolerance) + per scope (each user is one) loss_allowance_tokens of
    input and the premium of one write of its largest request at its
    longest TTL (docs/ARCHITECTURE.md, "Cache policy guarantees")."""
    workload = _workload(plan, head_kind, provider.floor)
    work = tmp_path_factory.mktemp("generated")
    played = {mode: await play(workload, oracle._factory(provider, mode), provider.name, provider.model, mode,
                               certs, work / mode, ADK_OVERRIDES) for mode in ("uncached", "agentctx")}
    defaults = CacheSettings.model_fields
    tolerance = defaults["loss_tolerance"].default
    largest = max(played["uncached"].prompts)
    bet = premium(cache_prices(provider.kind), tokens=largest, new_tokens=largest, ttl_s=3600.0)
    allowance = (defaults["loss_allowance_tokens"].default + bet) * provider.pricing.input_per_mtok / 1e6
    scopes = len({call.user for call in workload.calls})
    bound = played["uncached"].cost_usd * (1 + tolerance) + allowance * scopes
    assert played["agentctx"].cost_usd <= bound


async def test_the_bench_main_reports_every_figure_on_a_few_calls() -> None:
    """``python -m bench.economics_oracle --quick 2``: each shape's first two
    calls, two random workloads per provider; the summary the last line
    prints, each worst figure where it was found, the oracle below every
    mode and agentctx within its bound."""
    figures = await oracle.main(quick=2)
    cells, generated = figures["shapes"], figures["generated"]
    assert len(cells) == len(oracle.PROVIDERS) * len(edge_workloads(1024))
    assert len(generated) == 2 * len(oracle.PROVIDERS)
    for key in ("naive", "always", "client", "oracle"):
        assert figures[f"worst_vs_{key}_at"] in cells
    assert figures["worst_vs_naive"] == max(c["cost_ratio_vs_uncached"] for c in cells.values())
    assert all(c["cost_ratio_vs_oracle"] >= 1.0 for c in (*cells.values(), *generated.values()))
    assert figures["within_bound"] and figures["generated_within_bound"]
