"""An OpenAI Agents SDK agent's session time: AgentCtxSession against the
SDK's own SQLiteSession, in the same run.

A Runner conversation of 30 turns (an Agent with two tools, on the local
simulator through AgentCtxModel) runs on AgentCtxSession and on
SQLiteSession (a file), in A B B A rounds after a warm-up of each; every
session call the Runner makes (get_items, add_items...) is timed in the
SDK's venv (tests/openai_agents/venv.py, built or reused here;
bench/openai_agents_side.py), against a pair this process starts on
127.0.0.1 port 0 with SQLite.

Figures: ``session_ops_ratio`` (time inside session calls, agentctx over
SQLiteSession; aim at most 1.0) and per round; ``cached_share``, the share
of prompt tokens the cache tier served from cache with AgentCtxModel;
``agentctx_rpcs_per_call``, the RPCs each kind of session call made.

Run: ``.venv/bin/python -m bench.openai_agents [--turns 30 --rounds 2]``.
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
from typing import Any

from agentctx_common.certs import init_dev_certs
from tests.adk.conftest import CACHE_DEFAULTS, run_adk
from tests.openai_agents.venv import ROOT, openai_agents_python
from tests.support.pair import start_pair

AIM_SESSION_OPS_RATIO = 1.0


async def run(turns: int = 30, rounds: int = 2, *, tmp: pathlib.Path) -> dict[str, Any]:
    try:
        python = await asyncio.to_thread(openai_agents_python)
    except Exception as exc:  # noqa: BLE001 - reported, never replaced by numbers
        return {"error": f"the OpenAI Agents SDK venv could not be built: {type(exc).__name__}: {exc}"}
    certs = tmp / "certs"
    init_dev_certs(certs)
    pair = await start_pair(certs, tmp / "pair", cache=CACHE_DEFAULTS)
    try:
        side = await run_adk(python, [
            "-m", "bench.openai_agents_side", "--target", f"127.0.0.1:{pair.context_port}",
            "--ca", str(certs / "ca.pem"), "--sqlite", str(tmp / "oa.sqlite"),
            "--turns", str(turns), "--rounds", str(rounds)], {"OPENAI_AGENTS_DISABLE_TRACING": "1"}, cwd=ROOT)
    finally:
        await pair.close()
    if side.returncode != 0:
        return {"error": "the SDK side failed", "stderr": side.stderr[-3000:]}
    result = json.loads(side.stdout.strip().splitlines()[-1])
    ours, theirs = result["sides"]["agentctx"], result["sides"]["sqlite"]
    per_round = [round(r["agentctx"] / r["sqlite"], 3) for r in result["rounds"] if r.get("sqlite")]
    usage = result["usage"]
    figures: dict[str, Any] = {
        "session_ops_ratio": round(ours["session_ops_s"] / theirs["session_ops_s"], 3),
        "session_ops_ratio_per_round": per_round,
        "session_ops_ratio_median_round": round(statistics.median(per_round), 3) if per_round else None,
        "cached_share": round(usage["cached_prompt_tokens"] / max(usage["prompt_tokens"], 1), 4),
        "aim_session_ops_ratio_max": AIM_SESSION_OPS_RATIO,
        "turns_per_conversation": turns,
        "rounds": rounds,
        "cache_states": result["cache_states"],
    }
    for name, values in (("agentctx", ours), ("sqlite", theirs)):
        figures[f"{name}_session_ops_s"] = values["session_ops_s"]
        figures[f"{name}_ms_by_call"] = values["ms_by_call"]
        figures[f"{name}_calls"] = values["calls"]
    # RPCs per session call (agentctx; deterministic where the times are noisy).
    figures["agentctx_rpcs_per_call"] = {k: round(n / max(ours["calls"].get(k, 0), 1), 3)
                                         for k, n in ours["rpcs"].items()}
    figures["aim_met"] = figures["session_ops_ratio"] <= AIM_SESSION_OPS_RATIO
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2, help="conversation pairs per side, A B B A")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args.turns, args.rounds, tmp=pathlib.Path(tmp)))
    for key, value in result.items():
        print(f"{key:>32}: {value}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
