"""The part of bench.adk and bench.build_context that runs in the ADK venv
(google-adk needs google-genai < 3, the services 3.x: see tests/adk/venv.py).
The drivers start it as a subprocess; the last line it prints is one JSON
object.

- ``conversation``: ADK Runner conversations (an LlmAgent with the two tools
  of examples/adk_agent.py) on AgentCtxSessionService with AgentCtxLlm (with
  and without its event cache), and on ADK's DatabaseSessionService on a
  SQLite file, in alternating rounds.
  Every session-service call is timed.
- ``contents``: ADK's contents processor (``_get_contents``, what ADK's
  ``_ContentLlmRequestProcessor`` builds ``LlmRequest.contents`` with) over
  the events bench.build_context builds its sessions from;
  ``contents-serve``: the same in batches asked for on stdin, which
  bench.build_context interleaves with its own batches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentctx_adk import CACHE_METADATA_KEY, AgentCtxLlm, AgentCtxPlugin, AgentCtxSessionService, _convert
from agentctx_adk._llm import generate_request, llm_response
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types
from pydantic import PrivateAttr

import agentctx_client
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import event_pb2

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import adk_agent  # noqa: E402 - the example's tools, instruction and model, as the bench's conversation

# What a Runner (and an app around it) calls on its session service.
TIMED = ("create_session", "get_session", "list_sessions", "delete_session", "get_user_state", "append_event")
QUESTIONS = (
    "Please call get_weather for {city}.",
    "Please call lookup for the best museums in {city}.",
    "Thanks. What should I pack for three days in {city}?",
)
CITIES = ("Paris", "Rome", "Lisbon", "Vienna", "Oslo")
USER = "traveller"


class Timings:
    """Seconds and calls per session-service method, for one side."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(TIMED, 0.0)
        self.calls: dict[str, int] = dict.fromkeys(TIMED, 0)

    def wrap(self, service: BaseSessionService) -> None:
        """Times every call of ``service``'s methods (instance attributes
        shadow the class's, so the Runner calls the timed ones)."""
        for name in TIMED:
            setattr(service, name, self._timed(name, getattr(service, name)))

    def _timed(self, name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
        return timed

    def total(self) -> float:
        return sum(self.seconds.values())


class ContentsLlm(BaseLlm):
    """The model of the DatabaseSessionService side: ADK's own contents (its
    contents processor's output) sent as the input of a Generate that stores
    nothing, on an empty agentctx session named like the ADK session, so
    that both sides talk to the same simulator and get the same replies."""

    model: str = ""
    _client: agentctx_client.ContextClient = PrivateAttr()

    def __init__(self, client: agentctx_client.ContextClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client = client

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        request = generate_request(llm_request, self.model)
        for i, content in enumerate(llm_request.contents):
            proto, _ = _convert.content_to_proto(content)
            if proto is not None:
                request.input.append(event_pb2.Event(id=f"in-{i}", author=proto.role, content=proto))
        yield llm_response(await self._client._call(self._client.stub.Generate, request, None))


class Side:
    """One session service with its Runner and the timings of its calls."""

    def __init__(self, name: str, service: BaseSessionService, runner: Runner,
                 shadow: AgentCtxSessionService | None = None) -> None:
        self.name, self.service, self.runner, self.shadow = name, service, runner, shadow
        self.timings = Timings()
        self.timings.wrap(service)
        self.turns = 0
        self.model_calls = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.states: dict[str, int] = {}
        self.wall = 0.0

    async def conversation(self, app: str, turns: int, offset: int, *, count: bool = True) -> None:
        session = await self.service.create_session(app_name=app, user_id=USER)
        if self.shadow is not None:  # the model's empty agentctx session
            await self.shadow.create_session(app_name=app, user_id=USER, session_id=session.id)
        start = time.perf_counter()
        for i in range(turns):
            q = QUESTIONS[(i + offset) % len(QUESTIONS)].format(city=CITIES[(i + offset) % len(CITIES)])
            message = types.Content(role="user", parts=[types.Part(text=f"{q} (turn {i + 1})")])
            async for event in self.runner.run_async(user_id=USER, session_id=session.id, new_message=message):
                if count:
                    self._count(event)
        if count:
            self.wall += time.perf_counter() - start
            self.turns += turns
        else:  # a warm-up: not counted
            self.timings.reset()

    def _count(self, event: Event) -> None:
        if event.author == "user" or not event.usage_metadata:
            return
        usage = event.usage_metadata
        self.model_calls += 1
        self.prompt_tokens += usage.prompt_token_count or 0
        self.cached_tokens += usage.cached_content_token_count or 0
        record = (event.custom_metadata or {}).get(CACHE_METADATA_KEY)
        if record is not None:
            self.states[record["state"]] = self.states.get(record["state"], 0) + 1

    def figures(self) -> dict[str, Any]:
        t = self.timings
        return {
            "session_ops_s": round(t.total(), 6),
            "session_ops_ms_per_turn": round(t.total() * 1e3 / max(self.turns, 1), 4),
            "seconds": {k: round(v, 6) for k, v in t.seconds.items() if t.calls[k]},
            "calls": {k: v for k, v in t.calls.items() if v},
            "turns": self.turns,
            "model_calls": self.model_calls,
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_tokens,
            "cache_states": self.states,
            "wall_s": round(self.wall, 3),
        }


def _agent(model: BaseLlm) -> LlmAgent:
    return LlmAgent(name="travel_agent", model=model, instruction=adk_agent.INSTRUCTION,
                    tools=[adk_agent.get_weather, adk_agent.lookup])


def _runner(app: str, model: BaseLlm, plugin: BasePlugin, service: BaseSessionService) -> Runner:
    return Runner(app=App(name=app, root_agent=_agent(model), plugins=[plugin]), session_service=service)


async def conversation(args: argparse.Namespace) -> dict[str, Any]:
    tls = agentctx_client.TlsConfig(ca=args.ca, server_name="localhost")
    cached = policy_pb2.ContextConfig(model=adk_agent.MODEL, cache=policy_pb2.CachePolicy(enabled=True))
    plain = policy_pb2.ContextConfig(model=adk_agent.MODEL)
    sqlite = pathlib.Path(args.sqlite)
    # agentctx_uncached: the same service without its event cache (every
    # get_session lists the whole history), to show what the cache saves.
    async with AgentCtxSessionService.connect(args.target, tls=tls, config=cached, app_prefix="bench.") as ours, \
            AgentCtxSessionService.connect(args.target, tls=tls, config=cached, app_prefix="bench-uncached.",
                                           cached_sessions=0) as uncached, \
            AgentCtxSessionService.connect(args.target, tls=tls, config=plain, app_prefix="shadow.") as shadow, \
            DatabaseSessionService(f"sqlite+aiosqlite:///{sqlite}") as theirs:
        # Names are unique per service, and the app is what the Runner passes on.
        sides = {
            name: Side(name, service, _runner(args.app, AgentCtxLlm.for_sessions(service, model=adk_agent.MODEL),
                                              AgentCtxPlugin(service), service))
            for name, service in (("agentctx", ours), ("agentctx_uncached", uncached))
        }
        sides["adk"] = Side("adk", theirs, _runner(
            args.app, ContentsLlm(shadow.client, model=adk_agent.MODEL), AgentCtxPlugin(shadow), theirs),
            shadow=shadow)
        for side in sides.values():  # warm-up: tables, channels, imports
            await side.conversation(args.app, min(args.warmup_turns, args.turns), 0, count=False)
        order = ["agentctx", "adk", "agentctx_uncached"]
        rounds = []
        for r in range(args.rounds):
            # ABC CBA ...: drift and the machine's other load hit all alike.
            timed: dict[str, float] = {}
            for name in (order if r % 2 == 0 else order[::-1]):
                before = sides[name].timings.total()
                await sides[name].conversation(args.app, args.turns, r)
                timed[name] = round(sides[name].timings.total() - before, 6)
            rounds.append(timed)
        return {"sides": {name: side.figures() for name, side in sides.items()}, "rounds": rounds}


# --- bench.build_context's peer --------------------------------------------------


def adk_events(spec: list[dict[str, Any]]) -> list[Event]:
    """ADK events from bench.build_context's events (as JSON: author,
    invocation_id, content in agentctx's proto JSON)."""
    from google.protobuf import json_format

    from agentctx.type.v1 import content_pb2

    out = []
    for item in spec:
        content = json_format.ParseDict(item["content"], content_pb2.Content())
        out.append(Event(id=item["id"], author=item["author"], invocation_id=item["invocation_id"],
                         content=_convert.content_from_proto(content)))
    return out


def contents(args: argparse.Namespace) -> dict[str, Any]:
    from google.adk.flows.llm_flows import contents as adk_contents

    spec = json.loads(pathlib.Path(args.events).read_text())
    figures: dict[str, Any] = {}
    for size, (events_spec, count) in spec.items():
        events = adk_events(events_spec)
        built = adk_contents._get_contents(None, events, "agent")
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            adk_contents._get_contents(None, events, "agent")
            samples.append(time.perf_counter() - start)
        figures[size] = {"p50_s": statistics.median(samples), "contents": len(built), "samples": count}
    return figures


def contents_serve(args: argparse.Namespace) -> None:
    """ADK's contents processor in batches on request, so that the driver
    can interleave them with its own (A B B A): one JSON line in
    (``{"size": n, "count": k}``), one out (``{"samples": [seconds...]}``),
    after a first ``{"ready": true}`` once the events are loaded."""
    from google.adk.flows.llm_flows import contents as adk_contents

    spec = json.loads(pathlib.Path(args.events).read_text())
    events = {size: adk_events(events_spec) for size, (events_spec, _) in spec.items()}
    for evs in events.values():  # warm-up
        adk_contents._get_contents(None, evs, "agent")
    print(json.dumps({"ready": True, "contents": {k: len(v) for k, v in events.items()}}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        chosen, samples = events[str(ask["size"])], []
        for _ in range(ask["count"]):
            start = time.perf_counter()
            adk_contents._get_contents(None, chosen, "agent")
            samples.append(time.perf_counter() - start)
        print(json.dumps({"samples": samples}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("conversation")
    conv.add_argument("--target", required=True)
    conv.add_argument("--ca", required=True)
    conv.add_argument("--sqlite", required=True)
    conv.add_argument("--app", default="trips")
    conv.add_argument("--turns", type=int, default=30)
    conv.add_argument("--rounds", type=int, default=4)
    conv.add_argument("--warmup-turns", type=int, default=3)
    cont = sub.add_parser("contents")
    cont.add_argument("--events", required=True, help="JSON: {size: [events, samples]}")
    serve = sub.add_parser("contents-serve")
    serve.add_argument("--events", required=True, help="JSON: {size: [events, samples]}")
    args = parser.parse_args()
    if args.command == "contents-serve":
        contents_serve(args)
        return
    result = asyncio.run(conversation(args)) if args.command == "conversation" else contents(args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
