"""Economics of the prefix cache: one 60-call, tool-heavy agent
conversation on the local simulator (Gemini-like prices), run three ways in
the same run, each through the real service pair (Generate over TLS, the
cache service over mTLS, in this process on 127.0.0.1:0):

- ``uncached``: the session's cache is off;
- ``adk``: adk-python's published policy (ContextCacheConfig defaults):
  create only after two requests agree on the prefix, re-create every 10
  invocations, TTL 30 minutes, no TTL refresh. ADK counts invocations (a
  user message and its tool rounds); the registry counts model calls, so
  the interval is 10 invocations' worth of calls in this trace;
- ``agentctx``: the cache service's default policy.

The conversation is the demo's scripted coding agent (agentctx_cli.demo),
with compaction off and a Gemini-sized context window, so that all three
runs send exactly the same requests (checked). Time is simulated: the cache
service runs on a manual clock that moves ``SECONDS_PER_CALL`` per call, and
at the end far enough for every cache to expire, so the bill holds each
cache's storage until its deletion or expiry. Costs are the simulator's own
bill: uncached input, cached input, cache writes, storage and output.

``ideal_share`` is the share of prompt tokens that were a stable prefix: for
each call, the leading part it shares with the call before it (nothing for
the first call), measured on the uncached run's requests.

Bars: agentctx serves >= 75% of prompt tokens from cache and costs <= half
of the uncached run. Run: ``.venv/bin/python -m bench.economics`` from the
repository root. The last line is one JSON object with every figure.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import cache_pb2, generation_pb2
from agentctx_cli.demo import script
from agentctx_client import Event, FunctionCall
from agentctx_common.certs import init_dev_certs
from cache_service.app import CacheApp
from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import Prefix
from cache_service.domain.model import ModelCall, ModelReply, ResourceName
from cache_service.providers.local import LocalProvider
from cache_service.server import build_server as build_cache_server
from tests.support.servers import cache_settings, context_settings, secure_channel, start_context

CALLS = 60
SECONDS_PER_CALL = 20.0  # an agent's think time plus a tool run, simulated
CONTEXT_WINDOW = 1_000_000  # Gemini-sized: no overflow, no compaction
ADK_INTERVAL_INVOCATIONS = 10
ADK_TTL_S = 1800
BAR_CACHED_SHARE = 0.75
BAR_COST_RATIO = 0.5
_WORD = re.compile(r"[A-Za-z0-9_.\-]+")


class RecordingProvider(LocalProvider):
    """The simulator, keeping every request it answered (for the ideal
    share)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requests: list[ModelCall] = []

    async def generate(self, call: ModelCall, cached: ResourceName | None) -> ModelReply:
        self.requests.append(call)
        return await super().generate(call, cached)


@dataclass
class Run:
    mode: str
    prompt_tokens: int
    cached_tokens: int
    cost_usd: float
    creates: int
    bill: dict[str, float]
    states: dict[str, int]
    requests: list[ModelCall]
    replies: list[bytes]

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def figures(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "cached_share": round(self.cached_share, 4), "cost_usd": round(self.cost_usd, 6),
                "cache_creates": self.creates, "cache_states": self.states,
                "bill": {k: round(v, 6) if isinstance(v, float) else v for k, v in self.bill.items()}}


def invocations_for(calls: int) -> int:
    """Invocations (user messages) the scripted trace needs for ``calls``
    model calls: a task naming a tool takes two calls, any other one."""
    tools = set(script.TOOL_SPECS)
    used = invocations = 0
    for task in script.TASKS * (calls // len(script.TASKS) + 1):
        if used >= calls:
            break
        invocations += 1
        used += 2 if tools & set(_WORD.findall(task)) else 1
    return invocations


def session_config(mode: str) -> policy_pb2.ContextConfig:
    config = policy_pb2.ContextConfig(model=script.MODEL)
    config.cache.enabled = mode != "uncached"
    if mode == "adk":
        config.cache.ttl.FromSeconds(ADK_TTL_S)
    return config


async def run_mode(mode: str, certs: pathlib.Path, tmp: pathlib.Path, adk_interval_calls: int) -> Run:
    clock = ManualClock()
    provider = RecordingProvider(clock=clock, context_window=CONTEXT_WINDOW)
    overrides: dict[str, Any] = {"local_context_window": CONTEXT_WINDOW}
    if mode == "adk":
        overrides.update(create_policy="adk", adk_cache_intervals=adk_interval_calls, refresh_on_hit=False)
    settings = cache_settings(certs, tmp / mode, **overrides)
    cache_app = await CacheApp.create(settings, clock=clock, providers={"local": provider})
    cache_server = await build_cache_server(settings, app=cache_app)
    await cache_server.start()
    context_server = await start_context(context_settings(
        certs, tmp / mode, cache_target=f"127.0.0.1:{cache_server.port}", log_level="WARNING",
    ))
    channel = secure_channel(context_server.port, certs)
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    prompt = cached = 0
    states: dict[str, int] = {}
    replies: list[bytes] = []
    try:
        session = await stub.CreateSession(pb.CreateSessionRequest(
            parent="apps/bench/users/economics", session_id=mode,
            session=session_pb2.Session(config=session_config(mode)),
        ))
        # The demo's script, as messages for the raw stub.
        system = script.system_instruction().to_proto()
        tools = [generation_pb2.Tool(function_declarations=[d.to_proto() for d in script.tools()])]
        tasks = iter(script.TASKS * (CALLS // len(script.TASKS) + 1))
        pending: tuple[FunctionCall, ...] = ()
        for n in range(1, CALLS + 1):
            event_id = f"{mode}-{n}"
            event = (script.tool_results_event(event_id, pending, n) if pending
                     else script.user_event(event_id, next(tasks))).to_proto()
            response = await stub.Generate(pb.GenerateRequest(
                session=session.name, input=[event], system_instruction=system, tools=tools,
            ), timeout=30)
            replies.append(response.reply.content.SerializeToString(deterministic=True))
            usage = response.reply.usage
            prompt += usage.prompt_tokens
            cached += usage.cached_prompt_tokens
            meta = response.reply.cache_metadata
            name = cache_pb2.CacheState.Name(meta.state).removeprefix("CACHE_STATE_").lower()
            if meta.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_DISABLED:
                name = "off"
            states[name] = states.get(name, 0) + 1
            pending = Event.from_proto(response.reply).function_calls
            clock.advance(SECONDS_PER_CALL)
        # Whatever is still cached is billed until it expires.
        clock.advance(4 * 3600)
        bill = provider.bill()
        return Run(mode, prompt, cached, bill.cost(provider.pricing), provider.counts["create"],
                   bill.as_dict(provider.pricing), states, list(provider.requests), replies)
    finally:
        await channel.close()
        await context_server.stop(0)
        await cache_server.stop(0)


def _tokens(call: ModelCall, contents: int) -> int:
    return LocalProvider()._tokens(Prefix.of_call(call, contents).json())


def ideal_share(requests: list[ModelCall]) -> float:
    """Prompt tokens that were a stable prefix (shared with the call
    before), over all prompt tokens."""
    stable = total = 0
    previous: ModelCall | None = None
    for call in requests:
        total += _tokens(call, len(call.contents))
        if previous is not None and (call.model, call.system_instruction, call.tools, call.tool_config) == (
            previous.model, previous.system_instruction, previous.tools, previous.tool_config
        ):
            common = 0
            for a, b in zip(call.contents, previous.contents, strict=False):
                if a != b:
                    break
                common += 1
            stable += _tokens(call, common)
        previous = call
    return stable / total if total else 0.0


async def main() -> dict[str, Any]:
    invocations = invocations_for(CALLS)
    adk_interval_calls = max(1, round(ADK_INTERVAL_INVOCATIONS * CALLS / invocations))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-economics-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        runs = {mode: await run_mode(mode, certs, tmp, adk_interval_calls) for mode in ("uncached", "adk", "agentctx")}
    base, adk, ours = runs["uncached"], runs["adk"], runs["agentctx"]
    # The simulator's replies hash the whole conversation, cached part
    # included: equal replies mean the three runs held the same conversation.
    assert base.replies == adk.replies == ours.replies, "the three runs must hold the same conversation"
    ideal = ideal_share(base.requests)
    for run in runs.values():
        print(f"{run.mode:<9} prompt {run.prompt_tokens:>8,}  cached {run.cached_tokens:>8,} "
              f"({run.cached_share:6.1%})  creates {run.creates:>3}  cost ${run.cost_usd:.5f}  states {run.states}",
              file=sys.stderr)
    figures: dict[str, Any] = {
        "calls": CALLS,
        "invocations": invocations,
        "seconds_per_call": SECONDS_PER_CALL,
        "adk_interval_calls": adk_interval_calls,
        "ideal_share": round(ideal, 4),
        "cached_share": round(ours.cached_share, 4),
        "adk_cached_share": round(adk.cached_share, 4),
        "cost_uncached_usd": round(base.cost_usd, 6),
        "cost_adk_usd": round(adk.cost_usd, 6),
        "cost_agentctx_usd": round(ours.cost_usd, 6),
        "cost_ratio_vs_uncached": round(ours.cost_usd / base.cost_usd, 4),
        "cost_ratio_vs_adk": round(ours.cost_usd / adk.cost_usd, 4),
        "adk_cost_ratio_vs_uncached": round(adk.cost_usd / base.cost_usd, 4),
        "share_of_ideal": round(ours.cached_share / ideal, 4) if ideal else 0.0,
        "bar_cached_share_min": BAR_CACHED_SHARE,
        "bar_cost_ratio_max": BAR_COST_RATIO,
        "bars_met": ours.cached_share >= BAR_CACHED_SHARE and ours.cost_usd <= BAR_COST_RATIO * base.cost_usd,
        "wall_s": round(time.monotonic() - started, 2),
        "runs": {mode: run.figures() for mode, run in runs.items()},
    }
    return figures


if __name__ == "__main__":
    result = asyncio.run(main())
    print(json.dumps(result, sort_keys=True))
