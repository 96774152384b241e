"""An ADK agent's session-service time: agentctx against ADK's own
DatabaseSessionService, in the same run.

One ADK Runner conversation of 30 turns (an LlmAgent with the two tools of
examples/adk_agent.py, on the local simulator) runs on
AgentCtxSessionService with AgentCtxLlm (model calls through the context
service and the cache tier), and the same conversation on ADK's
DatabaseSessionService on a SQLite file (its model sends ADK's own contents
to the same simulator, storing nothing, so both sides store the same
events), and on AgentCtxSessionService without its event cache, in
alternating rounds (ABC CBA ...) after a warm-up of each. Every call
the Runner makes on its session service (get_session, append_event,
create_session...) is timed in the ADK venv (tests/adk/venv.py, built or
reused here), against a context service and cache service this process
starts on 127.0.0.1 port 0 with SQLite.

Figures: ``session_ops_ratio``, the time inside session-service calls,
agentctx over ADK (aim: at most 1.0), and its value per round;
``session_ops_ratio_uncached``, the same without the event cache;
``cached_share``, the share of the agentctx side's prompt tokens the cache
tier reports served from cache; per side the seconds and calls per method.

Run: ``.venv/bin/python -m bench.adk [--turns 30 --rounds 4]`` from the
repository root. The last line is one JSON object with every figure.
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
from tests.adk.venv import ROOT, adk_python
from tests.support.pair import start_pair

AIM_SESSION_OPS_RATIO = 1.0


def ratios_per_round(rounds: list[dict[str, float]], side: str = "agentctx") -> list[float]:
    """``side`` over ADK in each round (the sides run one after another)."""
    return [round(r[side] / r["adk"], 3) for r in rounds if r.get("adk")]


async def run(turns: int = 30, rounds: int = 4, *, tmp: pathlib.Path, warmup_turns: int = 3) -> dict[str, Any]:
    """The figures of ``rounds`` conversations of ``turns`` turns per side."""
    try:
        python = await asyncio.to_thread(adk_python)
    except Exception as exc:  # noqa: BLE001 - reported, never replaced by numbers
        return {"error": f"the ADK venv could not be built: {type(exc).__name__}: {exc}"}
    certs = tmp / "certs"
    init_dev_certs(certs)
    pair = await start_pair(certs, tmp / "pair", cache=CACHE_DEFAULTS)
    try:
        side = await run_adk(python, [
            "-m", "bench.adk_side", "conversation", "--target", f"127.0.0.1:{pair.context_port}",
            "--ca", str(certs / "ca.pem"), "--sqlite", str(tmp / "adk.sqlite"),
            "--turns", str(turns), "--rounds", str(rounds), "--warmup-turns", str(warmup_turns)], {}, cwd=ROOT)
    finally:
        await pair.close()
    if side.returncode != 0:
        return {"error": "the ADK side failed", "stderr": side.stderr[-3000:]}
    result = json.loads(side.stdout.strip().splitlines()[-1])
    ours, theirs, uncached = (result["sides"][k] for k in ("agentctx", "adk", "agentctx_uncached"))
    per_round = ratios_per_round(result["rounds"])
    figures: dict[str, Any] = {
        "session_ops_ratio": round(ours["session_ops_s"] / theirs["session_ops_s"], 3),
        "session_ops_ratio_per_round": per_round,
        "session_ops_ratio_median_round": round(statistics.median(per_round), 3) if per_round else None,
        "session_ops_ratio_uncached": round(uncached["session_ops_s"] / theirs["session_ops_s"], 3),
        "session_ops_ratio_uncached_per_round": ratios_per_round(result["rounds"], "agentctx_uncached"),
        "cached_share": round(ours["cached_prompt_tokens"] / max(ours["prompt_tokens"], 1), 4),
        "aim_session_ops_ratio_max": AIM_SESSION_OPS_RATIO,
        "turns_per_conversation": turns,
        "rounds": rounds,
    }
    for name, values in (("agentctx", ours), ("adk", theirs), ("agentctx_uncached", uncached)):
        figures[f"{name}_session_ops_ms_per_turn"] = values["session_ops_ms_per_turn"]
        figures[f"{name}_session_ops_s"] = values["session_ops_s"]
        figures[f"{name}_ms_by_call"] = {k: round(v * 1e3, 3) for k, v in values["seconds"].items()}
        figures[f"{name}_calls"] = values["calls"]
        figures[f"{name}_model_calls"] = values["model_calls"]
        figures[f"{name}_wall_s"] = values["wall_s"]
    figures["agentctx_cache_states"] = ours["cache_states"]
    figures["aim_met"] = figures["session_ops_ratio"] <= AIM_SESSION_OPS_RATIO
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4, help="conversations per side, in ABC CBA order")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args.turns, args.rounds, tmp=pathlib.Path(tmp)))
    for key, value in result.items():
        print(f"{key:>36}: {value}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
