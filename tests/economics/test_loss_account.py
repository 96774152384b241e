"""Rule 8 through the real service pair: each leased call's usage reaches
its scope's loss account (Generator -> Admission.settle), so a scope whose
writes are never read stops writing once its account is in deficit, while
one without the bound (always-cache) writes on."""

from __future__ import annotations

import pathlib

from agentctx_common.certs import init_dev_certs
from bench import economics_oracle as oracle
from bench.economics import ADK_OVERRIDES
from bench.economics_shapes import Call, Workload, edge_workloads, play


async def test_writes_stop_when_the_account_is_in_deficit(tmp_path: pathlib.Path) -> None:
    certs = tmp_path / "certs"
    init_dev_certs(certs)
    anthropic = oracle.PROVIDERS[1]
    # Ten unrelated one-call sessions, each under a 13.2k-token head of its
    # own: whatever is written is never read. Creating without evidence,
    # every call bets.
    unread = Workload("unread", tuple(Call(f"o{s}", f"Task {s}", 20.0) for s in range(10)), big_head=True,
                      own_heads=True)

    async def creates(overrides: dict[str, object]) -> tuple[int, float]:
        played = await play(unread, oracle._factory(anthropic, "agentctx"), anthropic.name, anthropic.model,
                            "agentctx", certs, tmp_path / str(len(overrides)), ADK_OVERRIDES, overrides)
        return played.states.get("created", 0), played.cost_usd

    unbounded, unbounded_cost = await creates({"sightings_before_create": 0, "loss_allowance_tokens": 1e18})
    bounded, bounded_cost = await creates({"sightings_before_create": 0})
    assert unbounded == 10
    # 4,096 tokens of allowance and 2% of each call's input: a quarter of a
    # 13.5k-token request fits once, the second bet takes it into deficit.
    assert bounded == 2
    assert bounded_cost < unbounded_cost


async def test_a_head_below_the_minimum_is_written_through_by_each_new_chat(tmp_path: pathlib.Path) -> None:
    """Anthropic-like, head 40 tokens under the minimum: a mark on the head
    alone caches nothing, so the second chat's first call writes through to
    its end (as the first chat's create did) and its next call reads it;
    with the scope's account in deficit it is sent uncached instead."""
    certs = tmp_path / "certs"
    init_dev_certs(certs)
    anthropic = oracle.PROVIDERS[1]
    shape = next(w for w in edge_workloads(anthropic.floor) if w.name == "head-below-min")
    # Chat 0's four calls and chat 1's first two.
    two = Workload(shape.name, shape.calls[:6], head_tokens=shape.head_tokens)

    async def run(overrides: dict[str, object]) -> tuple[dict[str, int], int]:
        played = await play(two, oracle._factory(anthropic, "agentctx"), anthropic.name, anthropic.model,
                            "agentctx", certs, tmp_path / str(len(overrides)), ADK_OVERRIDES, overrides)
        return played.states, played.cached_tokens

    states, cached = await run({})
    assert "bypass" not in states and states["created"] == 1
    broke, cached_in_deficit = await run({"loss_allowance_tokens": 0.0, "loss_tolerance": 0.0})
    assert broke.get("bypass", 0) >= 1 and cached_in_deficit < cached
