"""One cell of bench.economics_oracle, request by request: what each call
of one provider x shape paid in a mode (prompt, cached and written tokens,
the cache reference it was sent with), the simulator's bill, and the
oracle's cost, to trace where a policy pays more than the optimum.

Run: ``.venv/bin/python -m bench.economics_trace anthropic wave-own-heads``
from the repository root (a shape of ``edge_workloads``, or ``generated-N``:
the oracle bench's generated workload of seed N); a third argument picks the mode (``agentctx``,
``always``, ``client``, or ``unbounded``: agentctx without its loss
account, to tell what that account's bound costs on the cell). Output: one
line per call (index, session, time, prompt, cached, written, the mark's
TTL, leased contents and write-through where the call carried one), then
one JSON object with the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import random
import sys
import tempfile
from typing import Any

from agentctx_common.certs import init_dev_certs
from bench.economics import ADK_OVERRIDES, RecordingProvider
from bench.economics_oracle import ALWAYS_OVERRIDES, PROVIDERS, _factory, oracle_cost, requests_of
from bench.economics_shapes import edge_workloads, generated, play
from cache_service.domain.clock import ManualClock
from cache_service.domain.model import ModelCall, ModelReply
from cache_service.domain.ports import CacheRef

UNBOUNDED: dict[str, Any] = {"loss_allowance_tokens": 1e18}


class _Traced(RecordingProvider):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[tuple[Any, ...]] = []

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        reply = await super().generate(call, cache)
        usage = reply.usage
        self.rows.append((self.clock.wall(), usage.prompt_tokens if usage else 0,
                          usage.cached_prompt_tokens if usage else 0, usage.cache_write_tokens if usage else 0,
                          getattr(cache, "ttl_s", None), getattr(cache, "history_len", None),
                          getattr(cache, "write_through", None)))
        return reply


async def main(shape: str, workload_name: str, mode: str) -> dict[str, Any]:
    provider = next(p for p in PROVIDERS if p.shape == shape)
    if workload_name.startswith("generated-"):
        workload = generated(random.Random(int(workload_name.removeprefix("generated-"))), provider.floor,
                             workload_name)
    else:
        workload = next(w for w in edge_workloads(provider.floor) if w.name == workload_name)
    sims: dict[str, _Traced] = {}
    played = {}
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-trace-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        for run in ("uncached", mode):
            base = "agentctx" if run == "unbounded" else run

            def factory(clock: ManualClock, run: str = run, base: str = base) -> _Traced:
                template = _factory(provider, base)(clock)
                sim = _Traced(name=template.name, clock=clock, context_window=template.context_window,
                              naive=template.naive, min_cache_tokens=provider.floor)
                sim.caching = template.caching
                sims[run] = sim
                return sim

            overrides = ALWAYS_OVERRIDES if run == "always" else UNBOUNDED if run == "unbounded" else None
            played[run] = await play(workload, factory, provider.name, provider.model,
                                     provider.client if run == "client" else base, certs, tmp / run,
                                     ADK_OVERRIDES, overrides)
    plain = sims["uncached"]
    oracle = oracle_cost(requests_of(plain.requests, plain.times), provider.kind, provider.pricing, provider.floor)
    ours = played[mode]
    for n, (row, call) in enumerate(zip(sims[mode].rows, workload.calls, strict=True)):
        print(n, call.session, *row, file=sys.stderr)
    return {"cell": f"{shape}/{workload_name}", "mode": mode, "bill": sims[mode].bill().as_dict(provider.pricing),
            "prompt_usd": round(ours.cost_usd - ours.output_usd, 9), "oracle_prompt_usd": round(oracle, 9),
            "uncached_prompt_usd": round(played["uncached"].cost_usd - played["uncached"].output_usd, 9),
            "cost_ratio_vs_oracle": round(ours.cost_usd / (oracle + ours.output_usd), 4)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("provider", choices=[p.shape for p in PROVIDERS])
    parser.add_argument("shape")
    parser.add_argument("mode", nargs="?", default="agentctx", choices=("agentctx", "always", "client", "unbounded"))
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.provider, args.shape, args.mode)), sort_keys=True))
