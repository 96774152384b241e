"""Workload shapes for bench.economics beyond its 60-call trace (issue 16,
point 7): each a list of timed calls of several sessions of one app user,
played through the real service pair on the simulator's manual clock, in
three modes (uncached, the ecosystem's naive policy, agentctx).

- ``large-head``: one chat of 30 calls 20 s apart under a 13.2k-token
  system instruction and tools.
- ``compacting``: one 200-call session, 20 s apart, whose history is
  replaced 8 times by a summary (played as a new session of the same agent
  opening with the summary: to the cache, the same new prefix under the
  same head as a compaction makes).
- ``short-sessions``: 50 sessions of 3 calls sharing a system prompt, one
  after the other (60 s between sessions).
- ``sparse-one-call``: 50 one-call sessions 600 s apart, 13.2k-token head.
- ``sparse-four-call``: 50 four-call sessions 600 s apart (calls 20 s apart).
- ``bursts``: one session, 6 bursts of 8 calls 10 s apart, 15 minutes idle
  between bursts.
- ``one-off``: 50 unrelated one-call sessions 20 s apart, each under a
  system instruction of its own (about 13.2k tokens): no head is shared,
  so nothing written is ever read (where a write at first sight would
  lose).

No call names a tool, so each call is one invocation (ADK's unit).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import cache_pb2, generation_pb2
from agentctx_cli.demo import script
from agentctx_client import Content
from cache_service.app import CacheApp
from cache_service.domain.clock import ManualClock
from cache_service.server import build_server as build_cache_server
from tests.support.servers import cache_settings, context_settings, secure_channel, start_context

HEAD_TOKENS = 13_200


@dataclass(frozen=True)
class Call:
    session: str
    text: str
    after_s: float  # simulated time before this call


@dataclass(frozen=True)
class Workload:
    name: str
    calls: tuple[Call, ...]
    big_head: bool = False
    own_heads: bool = False  # each session under a system instruction of its own


def _words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i % 97}" for i in range(n))


def _session(name: str, count: int, gap_s: float, start_after_s: float, words: int = 120) -> Iterator[Call]:
    for i in range(count):
        yield Call(name, f"Step {i} of {name}: {_words('w', words)}", start_after_s if i == 0 else gap_s)


def workloads() -> tuple[Workload, ...]:
    compacting: list[Call] = []
    for segment in range(9):  # 8 compactions
        name = f"c{segment}"
        calls = list(_session(name, 22 if segment < 8 else 24, 20.0, 20.0))
        if segment:
            calls[0] = Call(name, f"Summary of the work so far (part {segment}): {_words('s', 400)}", 20.0)
        compacting += calls
    return (
        Workload("large-head", tuple(_session("chat", 30, 20.0, 0.0)), big_head=True),
        Workload("compacting", tuple(compacting)),
        Workload("short-sessions", tuple(c for s in range(50) for c in _session(f"s{s}", 3, 20.0, 60.0))),
        Workload("sparse-one-call", tuple(c for s in range(50) for c in _session(f"s{s}", 1, 0.0, 600.0)),
                 big_head=True),
        Workload("sparse-four-call", tuple(c for s in range(50) for c in _session(f"s{s}", 4, 20.0, 600.0)),
                 big_head=True),
        Workload("bursts", _bursts()),
        Workload("one-off", tuple(c for s in range(50) for c in _session(f"o{s}", 1, 0.0, 20.0)), big_head=True,
                 own_heads=True),
    )


def _bursts() -> tuple[Call, ...]:
    calls: list[Call] = []
    for b in range(6):
        for i, call in enumerate(_session("b", 8, 10.0, 900.0, words=80)):
            calls.append(Call("b", f"Burst {b} {call.text}", call.after_s if i == 0 else 10.0))
    return tuple(calls)


def head(big: bool, own: str = "") -> tuple[Any, list[generation_pb2.Tool]]:
    """The system instruction and tools: the demo's, or padded to about
    HEAD_TOKENS tokens (4 bytes a token); ``own`` makes it a session's own."""
    text = script.SYSTEM_TEXT
    if big:
        text += "\n" + _words(f"rule{own}", HEAD_TOKENS * 4 // 7)
    tools = [generation_pb2.Tool(function_declarations=[d.to_proto() for d in script.tools()])]
    return Content.user(text).to_proto(), tools


@dataclass
class Played:
    prompt_tokens: int
    cached_tokens: int
    cost_usd: float
    creates: int
    states: dict[str, int]
    replies: list[bytes]
    cache_write_tokens: int = 0  # as the GenerateResponses reported them
    billed_write_tokens: int = 0  # as the simulator billed them


async def play(workload: Workload, provider_factory: Any, provider_name: str, model: str, mode: str,
               certs: pathlib.Path, work: pathlib.Path, adk_overrides: dict[str, Any]) -> Played:
    """``workload`` in ``mode`` on a fresh pair; the simulator's bill."""
    clock = ManualClock()
    provider = provider_factory(clock)
    overrides: dict[str, Any] = {"local_context_window": 1_000_000}
    if mode == "adk":
        overrides.update(adk_overrides)
    settings = cache_settings(certs, work, **overrides)
    cache_app = await CacheApp.create(settings, clock=clock, providers={provider_name: provider})
    cache_server = await build_cache_server(settings, app=cache_app)
    await cache_server.start()
    context_server = await start_context(context_settings(
        certs, work, cache_target=f"127.0.0.1:{cache_server.port}", log_level="WARNING"))
    channel = secure_channel(context_server.port, certs)
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    shared = head(workload.big_head)
    sessions: dict[str, str] = {}
    prompt = cached = written = 0
    states: dict[str, int] = {}
    replies: list[bytes] = []
    try:
        for n, call in enumerate(workload.calls):
            clock.advance(call.after_s)
            if call.session not in sessions:
                config = policy_pb2.ContextConfig(model=model)
                config.cache.enabled = mode not in ("uncached", "naive")
                if mode == "adk":
                    config.cache.ttl.FromSeconds(1800)
                    # ADK keeps its cache record per agent of a session.
                    config.cache.scope_policy.update({"adk_agent": f"{mode}-{call.session}"})
                created = await stub.CreateSession(pb.CreateSessionRequest(
                    parent="apps/bench/users/shapes", session_id=f"{mode}-{call.session}",
                    session=session_pb2.Session(config=config)))
                sessions[call.session] = created.name
            system, tools = head(workload.big_head, call.session) if workload.own_heads else shared
            event = script.user_event(f"{mode}-{n}", call.text).to_proto()
            response = await stub.Generate(pb.GenerateRequest(
                session=sessions[call.session], input=[event], system_instruction=system, tools=tools), timeout=30)
            replies.append(response.reply.content.SerializeToString(deterministic=True))
            prompt += response.reply.usage.prompt_tokens
            cached += response.reply.usage.cached_prompt_tokens
            written += response.reply.usage.cache_write_tokens
            meta = response.reply.cache_metadata
            name = cache_pb2.CacheState.Name(meta.state).removeprefix("CACHE_STATE_").lower()
            if meta.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_DISABLED:
                name = "off"
            states[name] = states.get(name, 0) + 1
        clock.advance(4 * 3600)
        bill = provider.bill()
        return Played(prompt, cached, bill.cost(provider.pricing), provider.counts["create"], states, replies,
                      written, bill.cache_write_tokens)
    finally:
        await channel.close()
        await context_server.stop(0)
        await cache_server.stop(0)
