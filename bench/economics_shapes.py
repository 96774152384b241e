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

Shapes around the policy's edges (issue 21, point 12; ``edge_workloads``,
each made for a provider's minimum cacheable size ``floor``), played by
bench.economics_oracle against uncached, always-cache, the ecosystem's
naive client and the offline optimum:

- ``many-users``: 30 users of the app on one 13.2k-token head, each one
  3-call chat (calls 20 s apart), a user starting every 10 s;
  ``many-users-shared``: the same with the app opted in to shared heads
  (the cache service's ``shared_head_apps``: its users share head-only
  caches on providers with named caches; nothing changes on the others).
- ``head-below-min``, ``head-at-min``, ``head-above-min``: 8 chats of 4
  calls under a head of ``floor - 40``, ``floor`` and ``floor + 400``
  tokens, a chat starting every 60 s: the first call's request clears the
  minimum in all three.
- ``wave``: 40 chats of 3 calls (20 s apart) under a 13.2k-token head,
  starting 1 s apart (200 agents started at once, scaled down);
  ``wave-own-heads``: the same, each agent under a head of its own, so
  every start is a first sighting, pending while the others start.
- ``branching``: a 5-call trunk opening with a document about 1,500
  tokens over the minimum, then 10
  branches forked from its end (a new session holding a copy of its
  events), one or two calls each, a branch every 30 s.
- ``hourly-bursts``: 5 bursts of 4 calls (20 s apart) of one session under
  a 13.2k-token head, 3,700 s apart (just past the one-hour TTL);
  ``hourly-bursts-under``: the same 3,500 s apart (just inside it).

No call names a tool, so each call is one invocation (ADK's unit).
"""

from __future__ import annotations

import asyncio
import pathlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import cache_pb2, event_pb2, generation_pb2
from agentctx_cli.demo import script
from agentctx_client import Content
from agentctx_common.canonical import canonical_json, prefix_json
from cache_service.app import CacheApp
from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import estimate_tokens
from cache_service.server import build_server as build_cache_server
from tests.support.servers import cache_settings, context_settings, secure_channel, start_context

HEAD_TOKENS = 13_200
APP = "bench"  # the app every session belongs to


@dataclass(frozen=True)
class Call:
    session: str
    text: str
    after_s: float  # simulated time before this call
    user: str = "shapes"  # the app user whose session this is (a scope each)
    fork: str = ""  # a new session opening with a copy of this session's events so far


@dataclass(frozen=True)
class Workload:
    name: str
    calls: tuple[Call, ...]
    big_head: bool = False
    own_heads: bool = False  # each session under a system instruction of its own
    head_tokens: int = 0  # the head's size in tokens (0: big_head decides)
    shared_heads: bool = False  # the app opted in to shared heads (shared_head_apps)


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


def _timed(calls: list[tuple[float, Call]]) -> tuple[Call, ...]:
    """Calls at absolute times, in time order, each with its ``after_s``."""
    out: list[Call] = []
    now = 0.0
    for at, call in sorted(calls, key=lambda c: c[0]):
        out.append(Call(call.session, call.text, at - now, call.user, call.fork))
        now = at
    return tuple(out)


def _chats(name: str, chats: int, calls: int, start_every_s: float, gap_s: float = 20.0,
           per_user: bool = False) -> tuple[Call, ...]:
    """``chats`` chats of ``calls`` calls ``gap_s`` apart, one starting
    every ``start_every_s``, interleaved in time (each its own user with
    ``per_user``)."""
    timed = [(c * start_every_s + i * gap_s,
              Call(f"{name}{c}", f"Step {i} of {name}{c}: {_words('w', 120)}", 0.0,
                   f"u{c}" if per_user else "shapes"))
             for c in range(chats) for i in range(calls)]
    return _timed(timed)


def _branching(floor: int) -> tuple[Call, ...]:
    # The document alone is about 1,500 tokens over the provider's minimum (1.47 tokens a word).
    words = int((floor + 1500) / 1.47)
    trunk = [Call("t", f"Read this document and wait for questions: {_words('doc', words)}", 0.0)]
    trunk += [Call("t", f"Step {i} of the trunk: {_words('w', 120)}", 20.0) for i in range(1, 5)]
    branches: list[Call] = []
    for b in range(10):
        name = f"t-branch{b}"
        branches.append(Call(name, f"Branch {b}: try another approach. {_words('b', 120)}", 30.0, fork="t"))
        if b % 2:
            branches.append(Call(name, f"Branch {b} goes on: {_words('w', 120)}", 20.0))
    return (*trunk, *branches)


def _hourly(gap_s: float) -> tuple[Call, ...]:
    return tuple(Call("h", f"Burst {b} step {i}: {_words('w', 80)}", (gap_s if b else 0.0) if i == 0 else 20.0)
                 for b in range(5) for i in range(4))


def edge_workloads(floor: int) -> tuple[Workload, ...]:
    """The shapes around the policy's edges for a provider whose minimum
    cacheable prefix is ``floor`` tokens (see the module doc)."""
    return (
        Workload("many-users", _chats("m", 30, 3, 10.0, per_user=True), big_head=True),
        Workload("many-users-shared", _chats("m", 30, 3, 10.0, per_user=True), big_head=True, shared_heads=True),
        Workload("head-below-min", _chats("l", 8, 4, 60.0), head_tokens=floor - 40),
        Workload("head-at-min", _chats("a", 8, 4, 60.0), head_tokens=floor),
        Workload("head-above-min", _chats("g", 8, 4, 60.0), head_tokens=floor + 400),
        Workload("wave", _chats("v", 40, 3, 1.0), big_head=True),
        Workload("wave-own-heads", _chats("w", 40, 3, 1.0), big_head=True, own_heads=True),
        Workload("branching", _branching(floor)),
        Workload("hourly-bursts", _hourly(3700.0), big_head=True),
        Workload("hourly-bursts-under", _hourly(3500.0), big_head=True),
    )


def generated(rng: random.Random, floor: int, name: str = "generated") -> Workload:
    """A random workload: up to 8 sessions of up to 4 calls, of up to 3
    users, starting together or up to an hour apart, calls 5 s to an hour
    apart, inputs of 20 to 5,000 words, a session now and then forking an
    earlier one of its user, under a head of the demo's size, just under
    ``floor`` or 13.2k tokens."""
    timed: list[tuple[float, Call]] = []
    started: dict[str, tuple[str, float]] = {}  # user -> (their last session, its start)
    for s in range(rng.randint(1, 8)):
        user = f"u{rng.randint(0, 2)}"
        start = rng.choice([0.0, 1.0, 10.0, 60.0, 400.0, 1000.0, 3700.0]) * s
        gap = rng.choice([5.0, 20.0, 200.0, 400.0, 1000.0, 3700.0])
        words = rng.choice([20, 120, 2000, 5000])
        parent = started.get(user) if rng.random() < 0.4 else None
        if parent is not None:
            start = max(start, parent[1] + 1.0)
        session = f"s{s}"
        for i in range(rng.randint(1, 4)):
            timed.append((start + i * gap, Call(session, f"Step {i} of {session}: {_words('w', words)}", 0.0, user,
                                                parent[0] if parent is not None and i == 0 else "")))
        started[user] = (session, start)
    head_kind = rng.randint(0, 2)
    return Workload(name, _timed(timed), big_head=head_kind == 2, head_tokens=floor - 40 if head_kind == 1 else 0)


def _bursts() -> tuple[Call, ...]:
    calls: list[Call] = []
    for b in range(6):
        for i, call in enumerate(_session("b", 8, 10.0, 900.0, words=80)):
            calls.append(Call("b", f"Burst {b} {call.text}", call.after_s if i == 0 else 10.0))
    return tuple(calls)


def head(big: bool, own: str = "", tokens: int = 0, model: str = script.MODEL) -> tuple[Any, list[generation_pb2.Tool]]:
    """The system instruction and tools: the demo's, or padded to about
    HEAD_TOKENS tokens (4 bytes a token), or to exactly ``tokens`` as the
    registry and the simulator count them; ``own`` makes it a session's own."""
    if tokens:
        # A short instruction, no tools, and filler: the demo's head alone is over 1,024 tokens.
        return Content.user(_padded("You are a careful agent.", [], tokens, model)).to_proto(), []
    text = script.SYSTEM_TEXT
    tools = [generation_pb2.Tool(function_declarations=[d.to_proto() for d in script.tools()])]
    if big:
        text += "\n" + _words(f"rule{own}", HEAD_TOKENS * 4 // 7)
    return Content.user(text).to_proto(), tools


def head_tokens(system: Any, tools: list[generation_pb2.Tool], model: str = script.MODEL) -> int:
    """A head's tokens as the registry and the simulator count them."""
    return estimate_tokens(len(canonical_json(prefix_json(model, system, tools, None, ()))), 4.0)


def _padded(text: str, tools: list[generation_pb2.Tool], tokens: int, model: str) -> str:
    """``text`` padded with filler so that its head (for ``model``) counts ``tokens``."""
    base = head_tokens(Content.user(text).to_proto(), tools, model)
    if tokens <= base:
        raise ValueError(f"a head of {tokens} tokens is below the demo's own ({base})")
    padded = text + "\n" + "x" * ((tokens - base) * 4 - 4)
    while head_tokens(Content.user(padded).to_proto(), tools, model) < tokens:
        padded += "x"
    while head_tokens(Content.user(padded).to_proto(), tools, model) > tokens:
        padded = padded[:-1]
    return padded


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
    output_usd: float = 0.0  # of cost_usd, the output's (the same in every mode)
    prompts: tuple[int, ...] = ()  # each call's prompt tokens


async def _generate(stub: Any, request: pb.GenerateRequest, attempts: int = 3) -> pb.GenerateResponse:
    """Generate as an agent calls it: UNAVAILABLE (on a loaded machine, the
    cache service not answering in time) is retried with the same event
    ids after a second, as the status says; anything else is raised."""
    for _ in range(attempts - 1):
        try:
            response: pb.GenerateResponse = await stub.Generate(request, timeout=30)
            return response
        except grpc.aio.AioRpcError as err:
            if err.code() is not grpc.StatusCode.UNAVAILABLE:
                raise
        await asyncio.sleep(1.0)
    last: pb.GenerateResponse = await stub.Generate(request, timeout=30)
    return last


async def play(workload: Workload, provider_factory: Any, provider_name: str, model: str, mode: str,
               certs: pathlib.Path, work: pathlib.Path, adk_overrides: dict[str, Any],
               overrides: dict[str, Any] | None = None) -> Played:
    """``workload`` in ``mode`` on a fresh pair; the simulator's bill.
    ``overrides``: cache settings of the mode (e.g. always-cache's)."""
    clock = ManualClock()
    provider = provider_factory(clock)
    settings_overrides: dict[str, Any] = {"local_context_window": 1_000_000, **(overrides or {})}
    if workload.shared_heads:
        settings_overrides["shared_head_apps"] = [APP]
    if mode == "adk":
        settings_overrides.update(adk_overrides)
    settings = cache_settings(certs, work, **settings_overrides)
    cache_app = await CacheApp.create(settings, clock=clock, providers={provider_name: provider})
    cache_server = await build_cache_server(settings, app=cache_app)
    await cache_server.start()
    context_server = await start_context(context_settings(
        certs, work, cache_target=f"127.0.0.1:{cache_server.port}", log_level="WARNING"))
    channel = secure_channel(context_server.port, certs)
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    shared = head(workload.big_head, tokens=workload.head_tokens, model=model)
    sessions: dict[str, str] = {}
    prompt = cached = written = 0
    states: dict[str, int] = {}
    replies: list[bytes] = []
    prompts: list[int] = []
    try:
        for n, call in enumerate(workload.calls):
            clock.advance(call.after_s)
            if call.session not in sessions:
                sessions[call.session] = await _open(stub, call, model, mode, sessions)
            system, tools = head(workload.big_head, call.session) if workload.own_heads else shared
            event = script.user_event(f"{mode}-{n}", call.text).to_proto()
            response = await _generate(stub, pb.GenerateRequest(
                session=sessions[call.session], input=[event], system_instruction=system, tools=tools))
            replies.append(response.reply.content.SerializeToString(deterministic=True))
            prompt += response.reply.usage.prompt_tokens
            prompts.append(response.reply.usage.prompt_tokens)
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
                      written, bill.cache_write_tokens, bill.output_tokens * provider.pricing.output_per_mtok / 1e6,
                      tuple(prompts))
    finally:
        await channel.close()
        await context_server.stop(0)
        await cache_server.stop(0)


async def _open(stub: Any, call: Call, model: str, mode: str, sessions: dict[str, str]) -> str:
    """A new session for ``call`` (of its user), opening with a copy of the
    events of the session it forks, if any."""
    config = policy_pb2.ContextConfig(model=model)
    config.cache.enabled = mode not in ("uncached", "naive")
    if mode == "adk":
        config.cache.ttl.FromSeconds(1800)
        # ADK keeps its cache record per agent of a session.
        config.cache.scope_policy.update({"adk_agent": f"{mode}-{call.session}"})
    created = await stub.CreateSession(pb.CreateSessionRequest(
        parent=f"apps/{APP}/users/{call.user}", session_id=f"{mode}-{call.session}",
        session=session_pb2.Session(config=config)))
    if call.fork:
        listed = await stub.ListEvents(pb.ListEventsRequest(parent=sessions[call.fork], page_size=1000))
        copies = []
        for event in listed.events:
            copy = event_pb2.Event()
            copy.CopyFrom(event)
            for field in ("name", "sequence", "create_time"):
                copy.ClearField(field)
            copies.append(copy)
        await stub.BatchAppendEvents(pb.BatchAppendEventsRequest(parent=created.name, events=copies))
    return str(created.name)
