"""The cache policy against the offline optimum (issue 21, point 12): every
shape of ``bench.economics_shapes.edge_workloads`` on each provider price
shape, played through the real service pair on the simulator's manual
clock in four modes:

- ``uncached``: nothing cached (the never-cache baseline, "naive");
- ``always``: agentctx's registry creating at every request without
  evidence (``sightings_before_create`` 0: always cache);
- the ecosystem's client (``client``): ADK's policy on the Gemini-like
  shape, a breakpoint at every request's end on the Anthropic-like one, no
  ``prompt_cache_key`` on the OpenAI-like one (as bench.economics);
- ``agentctx``: the default policy;

and the ``oracle``: the cheapest bill any cache decisions could reach
knowing the future, computed from the uncached run's requests and times
(``oracle_cost``).

The oracle solves a relaxation exactly, so its cost is a lower bound on
the optimum (and on every policy): the requests' contents form a tree of
prefixes (a node is a head plus its first ``i`` contents, its tokens those
the ``i``-th content adds); each node is decided on its own, over the
requests that hold it in time order, by a dynamic programme over its
states between uses, which is exact for that node:

- MARKED (Anthropic-like): a use sends the node plain (input price),
  writes it (1.25x for 5 minutes, 2x for the hour: a write replaces the
  input), or, while a write lives, reads it (0.1x, and the read extends
  its TTL); states: none, 5-minute, one-hour.
- NAMED (Gemini-like): a use sends it plain, reads it if held, or creates
  a cache holding it (written at the input price, then read by the same
  call at the cached price; the call's own last content cannot be in a
  cache it names, so creating that one costs input plus the write);
  between uses the node is held (storage per token-hour) or dropped, and
  dropped at once after its last use.
- AUTOMATIC (OpenAI-like): nothing to decide (writes are free): each
  request reads the longest prefix any request touched within 5 minutes,
  routed ideally (one machine per head).

A request may write a node only if it reaches the provider's minimum, and
read it only if some prefix through the node, of at least the minimum,
was in an earlier request (a cache or breakpoint must end there); a use
that neither reads nor writes a MARKED node leaves its TTL running. The
nodes before a request's first one of at least the minimum are one node
with it (``_uses``: any cache or mark holding them holds that one). The
constraints left out (whole prefixes per cache, one cache per request, four
breakpoints, the 20-block lookback, a real router) only raise the true
optimum, so ``cost_ratio_vs_oracle`` >= 1 bounds how far from ideal a
policy is from above. The output's cost (equal in every mode) is in every
bill, the oracle's included.

Figures per provider x shape: ``cost_ratio_vs_uncached`` (agentctx over
never-cache), ``cost_ratio_vs_always``, ``cost_ratio_vs_client``,
``cost_ratio_vs_oracle``, and the same of the other modes over the oracle.
Summary: ``worst_vs_naive`` (agentctx over never-cache, worst shape),
``worst_vs_always``, ``worst_vs_client``, ``worst_vs_oracle``, each with
its ``*_at`` shape, and ``tolerance_vs_naive``. Each cell also carries the
policy's bound against never-cache (docs/ARCHITECTURE.md, "Cache policy
guarantees": uncached x (1 + loss_tolerance) plus, per scope,
loss_allowance_tokens and one hour-long write of its largest request)
and whether agentctx kept within it; ``GENERATED`` random workloads per
provider (``economics_shapes.generated``, fixed seeds, uncached and
agentctx only) add ``generated_worst_vs_naive``,
``generated_worst_vs_oracle`` and ``generated_within_bound``; those are
small, so the bound's constant shows in their ratios.

Run: ``.venv/bin/python -m bench.economics_oracle`` from the repository
root (about two minutes); ``--quick`` plays each shape's first calls only.
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import pathlib
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentctx_common.certs import init_dev_certs
from bench.economics import ADK_OVERRIDES, CONTEXT_WINDOW, RecordingProvider
from bench.economics_shapes import Workload, edge_workloads, generated, play
from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import Prefix, chain_digests
from cache_service.domain.model import ModelCall
from cache_service.domain.policy import premium
from cache_service.domain.pricing import ANTHROPIC, GEMINI, OPENAI, SHORT_TTL_S, Pricing, cache_prices
from cache_service.providers.local import LocalProvider
from cache_service.settings import CacheSettings

LONG_TTL_S = 3600.0
AUTOMATIC_TTL_S = 300.0
# The bound the policy keeps against never-cache on every shape
# (docs/ARCHITECTURE.md, "Cache policy guarantees").
TOLERANCE_VS_NAIVE = CacheSettings.model_fields["loss_tolerance"].default
LOSS_ALLOWANCE_TOKENS = CacheSettings.model_fields["loss_allowance_tokens"].default
GENERATED = 8  # random workloads per provider (economics_shapes.generated), seeds 0..7
# Always cache: create without evidence, and no loss bound.
ALWAYS_OVERRIDES: dict[str, Any] = {"sightings_before_create": 0, "loss_allowance_tokens": 1e18}


@dataclass(frozen=True)
class Provider:
    """A provider price shape of the simulator: its name, model, minimum
    cacheable prefix and its ecosystem's client mode."""

    shape: str
    name: str
    model: str
    kind: str  # "named", "marked", "automatic"
    pricing: Pricing
    floor: int
    client: str  # "adk" or "naive"


PROVIDERS = (
    Provider("gemini", "local", "local-sim-1", "named", GEMINI, 1024, "adk"),
    # claude-opus-4-6's minimum.
    Provider("anthropic", "local-anthropic", "local-sim-anthropic-1", "marked", ANTHROPIC, 4096, "naive"),
    Provider("openai", "local-openai", "local-sim-openai-1", "automatic", OPENAI, 1024, "naive"),
)
MODES = ("uncached", "always", "client", "agentctx")


@dataclass(frozen=True)
class Request:
    """What the oracle knows of a request: when it came, the chain digest
    of its head and each leading part of its contents (``chain[i]``: the
    head and the first ``i``), the tokens of each such leading part, and
    whether its contents end the call (the last is its own input)."""

    time: float
    chain: tuple[bytes, ...]
    tokens: tuple[int, ...]  # tokens[i]: the head and the first i contents


def requests_of(calls: Sequence[ModelCall], times: Sequence[float]) -> list[Request]:
    sim = LocalProvider()
    out = []
    for call, at in zip(calls, times, strict=True):
        head = Prefix.of_call(call, 0)
        chain = chain_digests(head.head_json(), call.contents)
        tokens = tuple(sim._tokens(Prefix.of_call(call, i).json()) for i in range(len(call.contents) + 1))
        out.append(Request(at, chain, tokens))
    return out


@dataclass(frozen=True)
class _Use:
    time: float
    last: bool  # the node is the request's last content (its own input)
    write: bool  # the request may write this node (it reaches the provider's minimum)
    read: bool  # it may read it: a prefix through it, at least the minimum, was in an earlier request


def _uses(requests: Sequence[Request], floor: int) -> dict[bytes, tuple[int, list[_Use]]]:
    """Each node's tokens (what it adds to its parent) and its uses, in time
    order. The nodes before a request's first one that reaches the minimum
    (its anchor) are one node with it: a cache or mark holding any of them
    holds at least the minimum, so it holds the anchor too, and a read of
    them reads the anchor (a head below the minimum is held per
    conversation, never apart from its first input)."""
    nodes: dict[bytes, tuple[int, list[_Use]]] = {}
    for r in sorted(requests, key=lambda r: r.time):
        n = len(r.chain) - 1
        anchor = next((i for i, t in enumerate(r.tokens) if t >= floor), 0)
        # A mark at the request's end, or a cache created beside it, holds at most the whole request.
        write = r.tokens[n] >= floor
        # A read ends at a prefix some earlier request held, of at least the minimum, at or after the node.
        readable = [False] * (n + 1)
        reach = False
        for i in range(n, -1, -1):
            reach = reach or (r.chain[i] in nodes and r.tokens[i] >= floor)
            readable[i] = reach
        for i, digest in enumerate(r.chain):
            if i < anchor:
                continue
            size = r.tokens[i] - (r.tokens[i - 1] if i > anchor else 0)
            entry = nodes.setdefault(digest, (size, []))
            entry[1].append(_Use(r.time, i == n and n > 0, write, readable[i]))
    return nodes


def _marked_node(uses: Sequence[_Use], p: Pricing) -> float:
    """Per token: the cheapest bill of one node's uses. A state is the
    write alive (none, 5-minute or one-hour) and when it was last written
    or read (a use that does neither leaves its TTL running)."""
    write, long = p.cache_write_per_mtok or p.input_per_mtok, p.cache_write_long_per_mtok or p.input_per_mtok
    ttl = {1: SHORT_TTL_S, 2: LONG_TTL_S}
    states: dict[tuple[int, float], float] = {(0, 0.0): 0.0}
    for use in uses:
        nxt: dict[tuple[int, float], float] = {}
        for (kind, since), cost in states.items():
            alive = kind > 0 and use.time - since < ttl[kind]
            options = [((kind, since) if alive else (0, 0.0), cost + p.input_per_mtok)]
            if use.write:
                options += [((1, use.time), cost + write), ((2, use.time), cost + long)]
            if alive and use.read:
                options.append(((kind, use.time), cost + p.cached_input_per_mtok))
            for state, total in options:
                nxt[state] = min(total, nxt.get(state, total))
        states = nxt
    return min(states.values())


def _named_node(uses: Sequence[_Use], p: Pricing) -> float:
    """Per token: the cheapest bill of one node's uses (states: 0 not
    held, 1 held); holding through a gap pays its storage."""
    inf = float("inf")
    write = p.cache_write_per_mtok or p.input_per_mtok
    cost = [0.0, inf]
    last: float | None = None
    for use in uses:
        gap = 0.0 if last is None else use.time - last
        keep = cost[1] + p.storage_per_mtok_hour * gap / 3600.0
        free = min(cost)
        plain = [free + p.input_per_mtok, keep + p.input_per_mtok]
        if not use.write:
            cost = plain
        elif use.last:
            # Its own input: sent, and written into a cache besides.
            cost = [plain[0], min(free + p.input_per_mtok + write, plain[1])]
        else:
            held = min(free + write + p.cached_input_per_mtok, plain[1])
            cost = [plain[0], min(held, keep + p.cached_input_per_mtok) if use.read else held]
        last = use.time
    return min(cost)


def _automatic(requests: Sequence[Request], p: Pricing, floor: int) -> float:
    touched: dict[bytes, float] = {}
    total = 0.0
    for r in sorted(requests, key=lambda r: r.time):
        prompt = r.tokens[-1]
        cached = 0
        if prompt >= floor:
            for i in range(len(r.chain) - 1, -1, -1):
                seen = touched.get(r.chain[i])
                if seen is not None and r.time - seen < AUTOMATIC_TTL_S:
                    cached = r.tokens[i] if r.tokens[i] >= floor else 0
                    break
            for digest in r.chain:
                touched[digest] = r.time
        total += (prompt - cached) * p.input_per_mtok + cached * p.cached_input_per_mtok
    return total


def oracle_cost(requests: Sequence[Request], kind: str, pricing: Pricing, floor: int) -> float:
    """USD of the prompts (output left out) under the cheapest cache
    decisions knowing the future: a lower bound on any policy's (module
    doc)."""
    if kind == "automatic":
        return _automatic(requests, pricing, floor) / 1e6
    node = _marked_node if kind == "marked" else _named_node
    return sum(tokens * node(uses, pricing) for tokens, uses in _uses(requests, floor).values()) / 1e6


def _factory(provider: Provider, mode: str) -> Any:
    def make(clock: ManualClock) -> RecordingProvider:
        sim = RecordingProvider(name=provider.name, clock=clock, context_window=CONTEXT_WINDOW,
                                naive=mode == "client" and provider.client == "naive",
                                min_cache_tokens=provider.floor)
        sim.caching = mode != "uncached"
        return sim
    return make


async def play_shape(provider: Provider, workload: Workload, certs: pathlib.Path,
                     work: pathlib.Path, modes: Sequence[str] = MODES) -> dict[str, Any]:
    """Each of ``modes`` (uncached first) of one provider on one workload,
    and the oracle: the figures of that cell."""
    costs: dict[str, float] = {}
    replies: list[bytes] | None = None
    oracle = 0.0
    largest = 0
    for mode in modes:
        sims: list[RecordingProvider] = []

        def factory(clock: ManualClock, mode: str = mode, sims: list[RecordingProvider] = sims) -> RecordingProvider:
            sim = _factory(provider, mode)(clock)
            sims.append(sim)
            return sim

        played_mode = provider.client if mode == "client" else mode
        played = await play(workload, factory, provider.name, provider.model, played_mode, certs,
                            work / provider.shape / workload.name / mode, ADK_OVERRIDES,
                            ALWAYS_OVERRIDES if mode == "always" else None)
        # The simulator's replies hash the whole conversation: equal replies, the same calls.
        assert replies is None or played.replies == replies, "every mode must hold the same calls"
        replies = played.replies
        costs[mode] = played.cost_usd
        if mode == "uncached":
            largest = max(played.prompts, default=0)
            sim = sims[0]
            oracle = oracle_cost(requests_of(sim.requests, sim.times), provider.kind, provider.pricing,
                                 provider.floor) + played.output_usd
    costs["oracle"] = oracle
    ours = costs["agentctx"]
    cell: dict[str, Any] = {"calls": len(workload.calls), "cost_usd": {k: round(v, 6) for k, v in costs.items()}}
    for mode in modes[:-1]:
        cell[f"cost_ratio_vs_{mode}"] = round(ours / costs[mode], 4)
        cell[f"{mode}_cost_ratio_vs_oracle"] = round(costs[mode] / oracle, 4)
    cell["cost_ratio_vs_oracle"] = round(ours / oracle, 4)
    # The policy's bound against never-cache (docs/ARCHITECTURE.md, "Cache policy guarantees").
    # Each user is a scope, and so is the app-wide one its users share heads in (named caches only).
    scopes = len({call.user for call in workload.calls}) + (workload.shared_heads and provider.kind == "named")
    bet = premium(cache_prices(provider.kind), tokens=largest, new_tokens=largest, ttl_s=LONG_TTL_S)
    slack = scopes * (LOSS_ALLOWANCE_TOKENS + bet) * provider.pricing.input_per_mtok / 1e6
    cell["bound_usd"] = round(costs["uncached"] * (1 + TOLERANCE_VS_NAIVE) + slack, 6)
    cell["within_bound"] = ours <= costs["uncached"] * (1 + TOLERANCE_VS_NAIVE) + slack
    return cell


def summary(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The worst ratio of agentctx over each baseline, and where."""
    out: dict[str, Any] = {}
    for key, ratio in (("naive", "cost_ratio_vs_uncached"), ("always", "cost_ratio_vs_always"),
                       ("client", "cost_ratio_vs_client"), ("oracle", "cost_ratio_vs_oracle")):
        at = max(cells, key=lambda name: cells[name][ratio])
        out[f"worst_vs_{key}"] = cells[at][ratio]
        out[f"worst_vs_{key}_at"] = at
    return out


async def main(quick: int = 0) -> dict[str, Any]:
    started = time.monotonic()
    cells: dict[str, dict[str, Any]] = {}
    random_cells: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-oracle-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        for provider in PROVIDERS:
            for workload in edge_workloads(provider.floor):
                if quick:
                    workload = dataclasses.replace(workload, calls=workload.calls[:quick])
                cell = await play_shape(provider, workload, certs, tmp)
                name = f"{provider.shape}/{workload.name}"
                cells[name] = cell
                print(f"{name:<34} vs uncached {cell['cost_ratio_vs_uncached']:.4f}  vs always "
                      f"{cell['cost_ratio_vs_always']:.4f}  vs client {cell['cost_ratio_vs_client']:.4f}  "
                      f"vs oracle {cell['cost_ratio_vs_oracle']:.4f}", file=sys.stderr)
            for seed in range(2 if quick else GENERATED):
                workload = generated(random.Random(seed), provider.floor, f"generated-{seed}")
                cell = await play_shape(provider, workload, certs, tmp, ("uncached", "agentctx"))
                random_cells[f"{provider.shape}/{workload.name}"] = cell
    return {**summary(cells), "tolerance_vs_naive": TOLERANCE_VS_NAIVE,
            "within_tolerance_vs_naive": all(c["cost_ratio_vs_uncached"] <= 1 + TOLERANCE_VS_NAIVE
                                             for c in cells.values()),
            "within_bound": all(c["within_bound"] for c in (*cells.values(), *random_cells.values())),
            # Random workloads: small, so the bound's constant shows in the ratio.
            "generated_worst_vs_naive": max(c["cost_ratio_vs_uncached"] for c in random_cells.values()),
            "generated_worst_vs_oracle": max(c["cost_ratio_vs_oracle"] for c in random_cells.values()),
            "generated_within_bound": all(c["within_bound"] for c in random_cells.values()),
            "loss_allowance_tokens": LOSS_ALLOWANCE_TOKENS,
            "providers": {p.shape: {"model": p.model, "kind": p.kind, "floor": p.floor, "client": p.client}
                          for p in PROVIDERS},
            "wall_s": round(time.monotonic() - started, 2), "shapes": cells, "generated": random_cells}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", type=int, default=0, help="play only each shape's first N calls")
    result = asyncio.run(main(parser.parse_args().quick))
    print(json.dumps(result, sort_keys=True))
