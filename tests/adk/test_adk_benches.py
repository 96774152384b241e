"""The ADK benchmarks' code paths on a few turns and events, so that they
cannot rot: bench.adk (a Runner conversation on both session services,
timed in the ADK venv) and bench.build_context's ADK peer (ADK's contents
processor in the ADK venv). No figure is checked against a bar here, and
each runs a few steps only (one round of three turns, one warm-up turn; a
few calls per size), so that it ends well inside the suite's timeout on a
machine whose cores are busy."""

from __future__ import annotations

import pathlib

from bench import adk as bench_adk
from bench import build_context


async def test_bench_adk_runs_the_same_conversation_on_both_services(tmp_path: pathlib.Path) -> None:
    figures = await bench_adk.run(turns=3, rounds=1, tmp=tmp_path, warmup_turns=1)
    assert "error" not in figures, figures
    # Both sides ran the same conversation: the same calls, the same model calls.
    assert figures["agentctx_calls"] == figures["adk_calls"], figures
    assert figures["agentctx_calls"]["get_session"] == 3 and figures["agentctx_calls"]["append_event"] > 3
    assert figures["agentctx_model_calls"] == figures["adk_model_calls"] == 5  # two tool turns, one plain
    assert figures["session_ops_ratio"] > 0 and len(figures["session_ops_ratio_per_round"]) == 1
    assert figures["agentctx_uncached_calls"] == figures["adk_calls"] and figures["session_ops_ratio_uncached"] > 0
    assert 0 < figures["cached_share"] < 1, figures
    assert set(figures["agentctx_cache_states"]) <= {"CREATED", "HIT", "GROWN", "BYPASS"}
    assert figures["agentctx_cache_states"].get("HIT", 0) + figures["agentctx_cache_states"].get("GROWN", 0) > 0


async def test_the_build_context_adk_peer_times_adks_contents_processor() -> None:
    made = {8: build_context.session_events(8), 12: build_context.session_events(12)}
    peer = await build_context.adk_peer(made, {8: 3, 12: 2})
    assert isinstance(peer, dict), peer
    assert set(peer) == {8, 12} and all(seconds > 0 for seconds in peer.values())
