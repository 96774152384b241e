"""Economics of the prefix cache: one 60-call, tool-heavy agent
conversation on the local simulator, in each provider price shape, each run
three ways in the same run through the real service pair (Generate over
TLS, the cache service over mTLS, in this process on 127.0.0.1:0):

- ``uncached``: the session's cache is off (and the simulator caches
  nothing);
- the ecosystem's naive policy: on the Gemini-like shape (explicit caches,
  ``local``) ``adk``, adk-python 2.13's policy (ContextCacheConfig
  defaults: create once a request agrees with the previous one of its
  agent, re-create after 10 invocations, TTL 30 minutes, no TTL refresh,
  no floor of its own on this model; the registry's ``adk`` variant, each
  session a scope of its own as ADK keys its agent's record). Replayed
  through adk-python 2.13's own cache code this trace caches 75.7% and
  costs 0.451x uncached, which the mode reproduces; on the Anthropic-like shape
  (marked caches, ``local-anthropic``) ``naive``: a breakpoint at the end of
  every request; on the OpenAI-like shape (automatic caches,
  ``local-openai``) ``naive``: no steering (no prompt_cache_key);
- ``agentctx``: the cache service's default policy.

The conversation is the demo's scripted coding agent (agentctx_cli.demo),
with compaction off and a Gemini-sized context window, so that all runs of a
shape send exactly the same requests (checked). What each shape adds to it
is where its naive policy is known to lose, and is reported beside the bare
conversation (``*-plain``) as well:

- Anthropic: the agent's one-off side requests (a sub-agent's file review
  every ``SIDE_EVERY`` calls, in its own session of the same user). A
  breakpoint at the end of every request writes them at 1.25x input and
  never reads them; agentctx writes only what was seen to repeat, and a
  first sighting where one is likely to be followed (domain.policy, rule
  7). On the bare linear conversation the naive breakpoint is close to
  optimal (each token written once, then read); agentctx writes the head
  at the first call and the conversation from the second, so it pays only
  the first call's own input once more (sent plain, then written):
  ``anthropic_plain`` shows that.
- OpenAI: ``OPENAI_USERS`` users of the app running the conversation at
  once (each on its own ticket), 72 calls a minute with the same head.
  OpenAI routes a request by its head and ``prompt_cache_key``, and spreads
  a route with more than about 15 calls a minute over more machines: without
  a key every user's call lands on one of several machines, most of which
  hold that conversation's prefix from some calls ago, or not at all.
  agentctx sends the scope's key, so each user keeps one machine. Alone, a
  conversation is under the rate either way (``openai_plain``).

Time is simulated: the cache service runs on a manual clock that moves
``SECONDS_PER_CALL`` per round of calls, and at the end far enough for
every cache to expire, so the bill holds each cache's storage until its
deletion or expiry. Costs are the simulator's own bill at its shape's
prices (domain.pricing): uncached input, cache writes, cached input,
storage and output.

``ideal_share`` (Gemini shape) is the share of prompt tokens that were a
stable prefix: for each call, the leading part it shares with the call
before it (nothing for the first call), measured on the uncached run's
requests.

Bars (Gemini shape): agentctx serves >= 75% of prompt tokens from cache and
costs <= half of the uncached run; and agentctx costs less than the naive
policy on every shape's trace (``cheaper_than_naive_on_every_shape``).
Beyond the trace, ``workloads`` plays bench.economics_shapes (a large-head
chat, a compacting session, many short sessions, sparse sessions with gaps
above the TTL, bursts with idle gaps) on the Gemini-like shape against the
adk mode and on the Anthropic-like one against its naive client, and
reports ``worst_cost_ratio_vs_uncached``, ``worst_cost_ratio_vs_adk`` and
``worst_cost_ratio_vs_naive`` over them. The ``one-off`` workload (unrelated
requests: nothing repeats, so no policy can save) is a control, reported
apart as ``one_off_{gemini,anthropic}_cost_ratio_vs_uncached``: it shows
what a first-sight write costs when the bet is lost.

Edge shapes (many users on one head, heads around each minimum, waves,
branching, hourly bursts) against never-cache, always-cache and the
offline optimum: bench.economics_oracle.

Run: ``.venv/bin/python -m bench.economics`` from the repository root
(about 5 minutes). The last line is one JSON object with every figure.
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
from agentctx.type.v1 import cache_pb2, event_pb2, generation_pb2
from agentctx_cli.demo import script
from agentctx_client import Event, FunctionCall
from agentctx_common.certs import init_dev_certs
from bench import economics_shapes
from cache_service.app import CacheApp
from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import Prefix
from cache_service.domain.model import ModelCall, ModelReply
from cache_service.domain.ports import CacheRef
from cache_service.providers.local import LocalProvider
from cache_service.server import build_server as build_cache_server
from tests.support.servers import cache_settings, context_settings, secure_channel, start_context

CALLS = 60
OPENAI_USERS = 24  # the app's users on one OpenAI-like server: 72 calls a minute share its head
OPENAI_MACHINES = 16
SIDE_EVERY = 5  # Anthropic shape: a one-off side request after every 5 calls
SECONDS_PER_CALL = 20.0  # an agent's think time plus a tool run, simulated
CONTEXT_WINDOW = 1_000_000  # Gemini-sized: no overflow, no compaction
ADK_INTERVAL_INVOCATIONS = 10
ADK_TTL_S = 1800
# adk-python's ContextCacheConfig defaults: 10 invocations, 30 minutes, no refresh.
ADK_OVERRIDES: dict[str, Any] = {"create_policy": "adk", "adk_cache_intervals": ADK_INTERVAL_INVOCATIONS,
                                 "refresh_on_hit": False}
BAR_CACHED_SHARE = 0.75
BAR_COST_RATIO = 0.5
_WORD = re.compile(r"[A-Za-z0-9_.\-]+")


class RecordingProvider(LocalProvider):
    """The simulator, keeping every request it answered (for the ideal
    share). ``naive`` plays the ecosystem's naive client: on a marked shape a
    breakpoint at the end of every request, on an automatic one no
    steering (no prompt_cache_key)."""

    def __init__(self, *, naive: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.naive = naive
        self.requests: list[ModelCall] = []
        self.times: list[float] = []  # each request's time on the simulator's clock

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        self.requests.append(call)
        self.times.append(self.clock.wall())
        return await super().generate(call, cache)

    def marks(self, call: ModelCall, cache: CacheRef | None) -> tuple[int, ...]:
        return (len(call.contents),) if self.naive else super().marks(call, cache)

    def routing_key(self, cache: CacheRef | None) -> str:
        return "" if self.naive else super().routing_key(cache)


@dataclass(frozen=True)
class Shape:
    """A provider price shape: the simulator's provider, its model, the
    ecosystem's naive policy and how many users run the conversation at once
    (an automatic cache's router only matters under shared traffic)."""

    name: str
    provider: str
    model: str
    naive: str  # the comparison mode
    users: int = 1
    side_every: int = 0  # a one-off side request (own session) after every this many calls
    machines: int = 4


SHAPES = (
    Shape("gemini", "local", script.MODEL, "adk"),
    Shape("anthropic", "local-anthropic", "local-sim-anthropic-1", "naive", side_every=SIDE_EVERY),
    Shape("openai", "local-openai", "local-sim-openai-1", "naive", users=OPENAI_USERS, machines=OPENAI_MACHINES),
    # The same shapes on the bare conversation alone, reported for comparison:
    # there the naive policies have nothing to lose (see the module doc).
    Shape("anthropic-plain", "local-anthropic", "local-sim-anthropic-1", "naive"),
    Shape("openai-plain", "local-openai", "local-sim-openai-1", "naive"),
)
CONTROL = "one-off"
PLAIN = ("anthropic-plain", "openai-plain")


def side_event(event_id: str, n: int) -> event_pb2.Event:
    """A one-off request of the agent's (a review by a sub-agent): a few
    kilobytes that no later call repeats."""
    output = json.dumps(script.tool_output("read_file", f"libs/http/side_{n}.py", n), sort_keys=True)
    return script.user_event(event_id, f"Review this file and list its risks:\n{output}").to_proto()


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


def session_config(mode: str, model: str = script.MODEL, agent: str = "") -> policy_pb2.ContextConfig:
    config = policy_pb2.ContextConfig(model=model)
    # The naive clients manage their provider's cache themselves: no leases.
    config.cache.enabled = mode not in ("uncached", "naive")
    if mode == "adk":
        config.cache.ttl.FromSeconds(ADK_TTL_S)
        # ADK keeps its cache record per agent of a session: a scope of its own.
        config.cache.scope_policy.update({"adk_agent": agent})
    return config


async def run_mode(shape: Shape, mode: str, certs: pathlib.Path, tmp: pathlib.Path, min_cache_tokens: int = 1024,
                   tag: str = "") -> Run:
    clock = ManualClock()
    provider = RecordingProvider(name=shape.provider, clock=clock, context_window=CONTEXT_WINDOW,
                                 naive=mode == "naive", machines=shape.machines, min_cache_tokens=min_cache_tokens)
    provider.caching = mode != "uncached"
    overrides: dict[str, Any] = {"local_context_window": CONTEXT_WINDOW}
    if mode == "adk":
        overrides.update(ADK_OVERRIDES)
    work = tmp / shape.name / (mode + tag)
    settings = cache_settings(certs, work, **overrides)
    cache_app = await CacheApp.create(settings, clock=clock, providers={shape.provider: provider})
    cache_server = await build_cache_server(settings, app=cache_app)
    await cache_server.start()
    context_server = await start_context(context_settings(
        certs, work, cache_target=f"127.0.0.1:{cache_server.port}", log_level="WARNING",
    ))
    channel = secure_channel(context_server.port, certs)
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    prompt = cached = 0
    states: dict[str, int] = {}
    replies: list[bytes] = []
    try:
        sessions = [await stub.CreateSession(pb.CreateSessionRequest(
            parent=f"apps/bench/users/economics-{u}", session_id=mode,
            session=session_pb2.Session(config=session_config(mode, shape.model, f"economics-{u}/{mode}")),
        )) for u in range(shape.users)]
        # The demo's script, as messages for the raw stub.
        system = script.system_instruction().to_proto()
        tools = [generation_pb2.Tool(function_declarations=[d.to_proto() for d in script.tools()])]
        # User 0 runs the demo's tasks; every other user the same work on its own ticket.
        tasks = [iter([t if u == 0 else f"{t} (ticket {u})" for t in script.TASKS * (CALLS // len(script.TASKS) + 1)])
                 for u in range(len(sessions))]
        pending: list[tuple[FunctionCall, ...]] = [() for _ in sessions]
        turns: list[tuple[str, event_pb2.Event, int]] = []
        for n in range(1, CALLS + 1):
            # The users' calls interleave, as on a shared server.
            turns.clear()
            for u, session in enumerate(sessions):
                event_id = f"{mode}-{u}-{n}"
                event = (script.tool_results_event(event_id, pending[u], n) if pending[u]
                         else script.user_event(event_id, next(tasks[u]))).to_proto()
                turns.append((session.name, event, u))
            if shape.side_every and n % shape.side_every == 0:
                side = await stub.CreateSession(pb.CreateSessionRequest(
                    parent="apps/bench/users/economics-0", session_id=f"{mode}-side-{n}",
                    session=session_pb2.Session(config=session_config(mode, shape.model, f"side-{n}")),
                ))
                turns.append((side.name, side_event(f"{mode}-side-{n}", n), -1))
            for session_name, event, u in turns:
                response = await stub.Generate(pb.GenerateRequest(
                    session=session_name, input=[event], system_instruction=system, tools=tools,
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
                if u >= 0:
                    pending[u] = Event.from_proto(response.reply).function_calls
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


async def run_shape(shape: Shape, certs: pathlib.Path, tmp: pathlib.Path) -> dict[str, Run]:
    runs = {mode: await run_mode(shape, mode, certs, tmp)
            for mode in ("uncached", shape.naive, "agentctx")}
    first = next(iter(runs.values()))
    # The simulator's replies hash the whole conversation, cached part
    # included: equal replies mean the runs held the same conversations.
    assert all(run.replies == first.replies for run in runs.values()), "the runs must hold the same conversation"
    for run in runs.values():
        print(f"{shape.name:<9} {run.mode:<9} prompt {run.prompt_tokens:>9,}  cached {run.cached_tokens:>9,} "
              f"({run.cached_share:6.1%})  creates {run.creates:>3}  cost ${run.cost_usd:.5f}  states {run.states}",
              file=sys.stderr)
    return runs


def shape_figures(shape: Shape, runs: dict[str, Run]) -> dict[str, Any]:
    base, naive, ours = runs["uncached"], runs[shape.naive], runs["agentctx"]
    return {
        "provider": shape.provider, "model": shape.model, "users": shape.users, "naive_policy": shape.naive,
        "cached_share": round(ours.cached_share, 4),
        "naive_cached_share": round(naive.cached_share, 4),
        "cost_uncached_usd": round(base.cost_usd, 6),
        "cost_naive_usd": round(naive.cost_usd, 6),
        "cost_agentctx_usd": round(ours.cost_usd, 6),
        "cost_ratio_vs_uncached": round(ours.cost_usd / base.cost_usd, 4),
        "cost_ratio_vs_naive": round(ours.cost_usd / naive.cost_usd, 4),
        "naive_cost_ratio_vs_uncached": round(naive.cost_usd / base.cost_usd, 4),
        "cheaper_than_naive": ours.cost_usd < naive.cost_usd,
        "runs": {mode: run.figures() for mode, run in runs.items()},
    }


async def main() -> dict[str, Any]:
    invocations = invocations_for(CALLS)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-economics-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        shapes = {shape.name: (shape, await run_shape(shape, certs, tmp)) for shape in SHAPES}
        workloads = await run_workloads(certs, tmp)
        # The worst figures are over the workload shapes; the one-off control is reported apart.
        shaped = {name: w for name, w in workloads.items() if not name.startswith(f"{CONTROL}/")}
        # ADK on Gemini models, where adk-python applies the model's floor
        # (2,048 tokens for gemini-2.5, 4,096 for gemini-3) to the prefix:
        # the same gate as the provider's minimum.
        adk_floors = {floor: await run_mode(SHAPES[0], "adk", certs, tmp, floor, f"-{floor}") for floor in (2048, 4096)}
    runs = shapes["gemini"][1]
    base, adk, ours = runs["uncached"], runs["adk"], runs["agentctx"]
    ideal = ideal_share(base.requests)
    per_shape = {name: shape_figures(shape, shape_runs) for name, (shape, shape_runs) in shapes.items()}
    figures: dict[str, Any] = {
        "calls": CALLS,
        "invocations": invocations,
        "seconds_per_call": SECONDS_PER_CALL,
        "adk_interval_invocations": ADK_INTERVAL_INVOCATIONS,
        # The Gemini-like shape (explicit caches), against ADK's policy.
        "ideal_share": round(ideal, 4),
        "cached_share": round(ours.cached_share, 4),
        "adk_cached_share": round(adk.cached_share, 4),
        "cost_uncached_usd": round(base.cost_usd, 6),
        "cost_adk_usd": round(adk.cost_usd, 6),
        "cost_agentctx_usd": round(ours.cost_usd, 6),
        "cost_ratio_vs_uncached": round(ours.cost_usd / base.cost_usd, 4),
        "cost_ratio_vs_adk": round(ours.cost_usd / adk.cost_usd, 4),
        "adk_cost_ratio_vs_uncached": round(adk.cost_usd / base.cost_usd, 4),
        "adk_gemini_2_5_cached_share": round(adk_floors[2048].cached_share, 4),
        "adk_gemini_2_5_cost_ratio_vs_uncached": round(adk_floors[2048].cost_usd / base.cost_usd, 4),
        "adk_gemini_3_cached_share": round(adk_floors[4096].cached_share, 4),
        "adk_gemini_3_cost_ratio_vs_uncached": round(adk_floors[4096].cost_usd / base.cost_usd, 4),
        "share_of_ideal": round(ours.cached_share / ideal, 4) if ideal else 0.0,
        # The Anthropic-like (marked) and OpenAI-like (automatic) shapes.
        "anthropic_cached_share": per_shape["anthropic"]["cached_share"],
        "anthropic_cost_ratio_vs_uncached": per_shape["anthropic"]["cost_ratio_vs_uncached"],
        "anthropic_cost_ratio_vs_naive": per_shape["anthropic"]["cost_ratio_vs_naive"],
        "openai_cached_share": per_shape["openai"]["cached_share"],
        "openai_naive_cached_share": per_shape["openai"]["naive_cached_share"],
        "openai_cost_ratio_vs_uncached": per_shape["openai"]["cost_ratio_vs_uncached"],
        "openai_cost_ratio_vs_naive": per_shape["openai"]["cost_ratio_vs_naive"],
        "anthropic_plain_cost_ratio_vs_naive": per_shape["anthropic-plain"]["cost_ratio_vs_naive"],
        "openai_plain_cost_ratio_vs_naive": per_shape["openai-plain"]["cost_ratio_vs_naive"],
        "cheaper_than_naive_on_every_shape": all(f["cheaper_than_naive"] for name, f in per_shape.items()
                                                 if name not in PLAIN),
        "bar_cached_share_min": BAR_CACHED_SHARE,
        "bar_cost_ratio_max": BAR_COST_RATIO,
        "bars_met": (ours.cached_share >= BAR_CACHED_SHARE and ours.cost_usd <= BAR_COST_RATIO * base.cost_usd
                     and all(f["cheaper_than_naive"] for name, f in per_shape.items() if name not in PLAIN)),
        "workloads": workloads,
        "worst_cost_ratio_vs_uncached": max(w["cost_ratio_vs_uncached"] for w in shaped.values()),
        "worst_cost_ratio_vs_adk": max(w["cost_ratio_vs_adk"] for w in shaped.values() if "cost_ratio_vs_adk" in w),
        "worst_cost_ratio_vs_naive": max(w["cost_ratio_vs_naive"] for w in shaped.values()),
        # The control: nothing repeats, so nothing can be saved.
        **{f"one_off_{name.split('/')[1]}_cost_ratio_vs_uncached": w["cost_ratio_vs_uncached"]
           for name, w in workloads.items() if name.startswith(f"{CONTROL}/")},
        "wall_s": round(time.monotonic() - started, 2),
        "shapes": per_shape,
    }
    return figures


def _provider(name: str, naive: bool, caching: bool) -> Any:
    def make(clock: ManualClock) -> RecordingProvider:
        provider = RecordingProvider(name=name, clock=clock, context_window=CONTEXT_WINDOW, naive=naive)
        provider.caching = caching
        return provider
    return make


# (price shape, its provider, model, modes): Gemini against ADK, Anthropic against its naive client.
WORKLOAD_SHAPES = (
    ("gemini", "local", script.MODEL, ("uncached", "adk", "agentctx")),
    ("anthropic", "local-anthropic", "local-sim-anthropic-1", ("uncached", "naive", "agentctx")),
)


async def run_workloads(certs: pathlib.Path, tmp: pathlib.Path) -> dict[str, Any]:
    """Every economics_shapes workload on the Gemini-like shape (against
    ADK's policy) and the Anthropic-like one (against a breakpoint at every
    request's end); the OpenAI-like shape is left out: nothing is written
    there, so no policy can cost more than uncached."""
    out: dict[str, Any] = {}
    for workload in economics_shapes.workloads():
        for shape, provider, model, modes in WORKLOAD_SHAPES:
            played = {}
            for mode in modes:
                played[mode] = await economics_shapes.play(
                    workload, _provider(provider, mode == "naive", mode != "uncached"), provider, model, mode,
                    certs, tmp / "workloads" / workload.name / shape / mode, ADK_OVERRIDES)
            first = played["uncached"]
            assert all(p.replies == first.replies for p in played.values()), "the runs must hold the same calls"
            base, ours = played["uncached"], played["agentctx"]
            other = modes[1]
            figures: dict[str, Any] = {
                "calls": len(workload.calls),
                "cost_ratio_vs_uncached": round(ours.cost_usd / base.cost_usd, 4),
                f"{other}_cost_ratio_vs_uncached": round(played[other].cost_usd / base.cost_usd, 4),
                "cost_ratio_vs_naive": round(ours.cost_usd / played[other].cost_usd, 4),
                "cached_share": round(ours.cached_tokens / ours.prompt_tokens, 4),
                f"{other}_cached_share": round(played[other].cached_tokens / played[other].prompt_tokens, 4),
                "creates": ours.creates, f"{other}_creates": played[other].creates,
                "states": ours.states, f"{other}_states": played[other].states,
            }
            if other == "adk":
                figures["cost_ratio_vs_adk"] = figures["cost_ratio_vs_naive"]
            out[f"{workload.name}/{shape}"] = figures
            print(f"{workload.name:<17} {shape:<9} vs uncached {figures['cost_ratio_vs_uncached']:.4f}  "
                  f"vs {other} {figures['cost_ratio_vs_naive']:.4f}  {other} vs uncached "
                  f"{figures[f'{other}_cost_ratio_vs_uncached']:.4f}  states {ours.states} / {played[other].states}",
                  file=sys.stderr)
    return out


if __name__ == "__main__":
    result = asyncio.run(main())
    print(json.dumps(result, sort_keys=True))
