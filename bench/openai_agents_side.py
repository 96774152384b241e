"""The OpenAI Agents SDK side of bench.openai_agents, run in that SDK's
venv (tests/openai_agents/venv.py): Runner conversations with two tools on
AgentCtxSession and on the SDK's SQLiteSession (a file), in A B B A order,
every session call timed. Both sides call the model through AgentCtxModel
(the cache tier's local simulator), so they store the same items; only the
session's time is compared, and on agentctx the RPCs each session call
made. Prints one JSON line."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from typing import Any

from agentctx_openai_agents import AgentCtxModel, AgentCtxModelProvider, AgentCtxSession
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool

import agentctx_client

_METHODS = ("get_items", "add_items", "pop_item", "clear_session")


class Timed:
    """A session whose calls are timed, and counted with the RPCs they made
    (``rpcs``: a running count of the client's RPCs; nothing else changed)."""

    def __init__(self, inner: Any, seconds: dict[str, float], calls: dict[str, int],
                 rpcs: dict[str, int], made: dict[str, int]) -> None:
        self.inner, self.seconds, self.calls, self.rpcs, self.made = inner, seconds, calls, rpcs, made
        self.session_id = inner.session_id
        self.session_settings = getattr(inner, "session_settings", None)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in _METHODS:
            return method

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start, before = time.perf_counter(), self.made["n"]
            try:
                return await method(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
                self.rpcs[name] += self.made["n"] - before
        return timed

    async def get_items(self, limit: int | None = None) -> Any:
        return await self.__getattr__("get_items")(limit)

    async def add_items(self, items: list[Any]) -> None:
        await self.__getattr__("add_items")(items)

    async def pop_item(self) -> Any:
        return await self.__getattr__("pop_item")()

    async def clear_session(self) -> None:
        await self.__getattr__("clear_session")()


@function_tool
def get_weather(query: str) -> str:
    """Current weather for a city."""
    return json.dumps({"query": query, "forecast": "sunny", "high_c": 21, "notes": "light wind " * 40})


@function_tool
def get_time(query: str) -> str:
    """Local time in a city."""
    return json.dumps({"query": query, "time": "14:05"})


def _prompts(turns: int, offset: int) -> list[str]:
    asks = ("Please call get_weather for Paris, day {}.", "Please call get_time for Lyon, turn {}.",
            "Thanks. Summarize what you know so far, point {}.")
    return [asks[(offset + i) % 3].format(offset + i) for i in range(turns)]


async def _conversation(session: Any, provider: AgentCtxModelProvider, turns: int, offset: int) -> None:
    agent = Agent(name="planner", instructions="You are a careful travel assistant. " * 30,
                  tools=[get_weather, get_time])
    config = RunConfig(model_provider=provider, tracing_disabled=True)
    for text in _prompts(turns, offset):
        await Runner.run(agent, text, session=session, run_config=config)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    tls = agentctx_client.TlsConfig(ca=args.ca, server_name="localhost")
    sides = ("agentctx", "sqlite")
    seconds: dict[str, defaultdict[str, float]] = {s: defaultdict(float) for s in sides}
    calls: dict[str, defaultdict[str, int]] = {s: defaultdict(int) for s in sides}
    rpcs: dict[str, defaultdict[str, int]] = {s: defaultdict(int) for s in sides}
    made = {"n": 0}
    rounds: list[dict[str, float]] = []
    usage = {"prompt_tokens": 0, "cached_prompt_tokens": 0}
    states: dict[str, int] = defaultdict(int)
    async with agentctx_client.connect(args.target, tls=tls) as client:
        provider = AgentCtxModelProvider(client, app="bench.oa", user="u", default_model="local-sim-1")
        model = provider.get_model(None)
        assert isinstance(model, AgentCtxModel)
        original = model._generate

        async def counted(*a: Any, **kw: Any) -> Any:
            result = await original(*a, **kw)
            if result.reply.usage is not None:
                usage["prompt_tokens"] += result.reply.usage.prompt_tokens
                usage["cached_prompt_tokens"] += result.reply.usage.cached_prompt_tokens
            if result.reply.proto is not None:
                states[str(result.reply.proto.cache_metadata.state)] += 1
            return result
        model._generate = counted  # type: ignore[method-assign]
        rpc = client._call

        async def counted_rpc(*a: Any, **kw: Any) -> Any:
            made["n"] += 1
            return await rpc(*a, **kw)
        client._call = counted_rpc  # type: ignore[method-assign]

        def make(side: str, n: int) -> Any:
            if side == "agentctx":
                return AgentCtxSession(f"r{n}", client, app="bench.oa", user="u", model="local-sim-1")
            return SQLiteSession(f"r{n}", f"{args.sqlite}.{n}")

        # Warm-up: one short conversation per side, not counted.
        for side in sides:
            await _conversation(make(side, 1000), provider, 3, 0)
        order = [s for r in range(args.rounds) for s in (sides if r % 2 == 0 else sides[::-1])]
        for n, side in enumerate(order):
            spent: dict[str, float] = defaultdict(float)
            session = Timed(make(side, n), spent, calls[side], rpcs[side], made)
            await _conversation(session, provider, args.turns, n // 2)  # the same prompts on both sides
            for k, v in spent.items():
                seconds[side][k] += v
            if n % 2 == 0:
                rounds.append({})
            rounds[-1][side] = sum(spent.values())
    out = {s: {"session_ops_s": round(sum(seconds[s].values()), 4),
               "ms_by_call": {k: round(v * 1e3, 2) for k, v in seconds[s].items()},
               "calls": dict(calls[s]), "rpcs": dict(rpcs[s])} for s in sides}
    return {"sides": out, "rounds": rounds, "usage": usage, "cache_states": dict(states)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--sqlite", required=True)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
