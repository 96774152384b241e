"""An ADK agent on agentctx: an LlmAgent with two tools, run by ADK's
Runner on AgentCtxSessionService (sessions and events in the context
service) and AgentCtxLlm (model calls made by the context service through
the cache tier, the provider key on the service side). Prints the cache
state of every model call.

Run it in the ADK venv against the pair ``make up`` starts (the local
simulator model):

    .venv/bin/python -m tests.adk.venv        # builds or reuses the ADK venv, prints its python
    .venv-adk/<hash>/bin/python examples/adk_agent.py [--target 127.0.0.1:50051] [--certs .agentctx/certs]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import uuid

from agentctx_adk import CACHE_METADATA_KEY, AgentCtxLlm, AgentCtxPlugin, AgentCtxSessionService
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.genai import types

from agentctx.context.v1 import policy_pb2
from agentctx_client import TlsConfig

MODEL = "local-sim-1"
INSTRUCTION = ("You are a travel assistant. Look facts up with your tools before you answer, "
               "and answer in two sentences. ") * 6
QUESTIONS = (
    "Please call get_weather for Paris.",
    "Please call lookup for the best museums in Paris.",
    "Thanks. What should I pack for three days?",
    "And what else should I know before I go?",
)


def get_weather(city: str = "") -> dict[str, str]:
    """Current weather for a city."""
    return {"city": city or "Paris", "forecast": "sunny", "high_c": "24"}


def lookup(q: str = "") -> dict[str, str]:
    """Looks a fact up."""
    return {"query": q, "answer": "The Louvre and the Musee d'Orsay."}


def tls_config(certs: pathlib.Path) -> TlsConfig:
    """The dev CA, and the sample agent's client certificate when present."""
    cert, key = certs / "agent-client.pem", certs / "agent-client.key"
    if cert.exists() and key.exists():
        return TlsConfig(ca=str(certs / "ca.pem"), cert=str(cert), key=str(key), server_name="localhost")
    return TlsConfig(ca=str(certs / "ca.pem"), server_name="localhost")


async def run(target: str, certs: pathlib.Path, app_name: str) -> list[str]:
    """Runs the conversation; returns the cache state of each model call."""
    config = policy_pb2.ContextConfig(model=MODEL, cache=policy_pb2.CachePolicy(enabled=True))
    states: list[str] = []
    async with AgentCtxSessionService.connect(target, tls=tls_config(certs), config=config) as sessions:
        agent = LlmAgent(name="travel_agent", model=AgentCtxLlm.for_sessions(sessions, model=MODEL),
                         instruction=INSTRUCTION, tools=[get_weather, lookup])
        runner = Runner(app=App(name=app_name, root_agent=agent, plugins=[AgentCtxPlugin(sessions)]),
                        session_service=sessions)
        session = await sessions.create_session(app_name=app_name, user_id="traveller")
        for question in QUESTIONS:
            print(f"user: {question}")
            message = types.Content(role="user", parts=[types.Part(text=question)])
            async for event in runner.run_async(user_id="traveller", session_id=session.id, new_message=message):
                record = (event.custom_metadata or {}).get(CACHE_METADATA_KEY)
                for call in event.get_function_calls():
                    print(f"  model -> tool {call.name}({dict(call.args or {})})")
                for response in event.get_function_responses():
                    print(f"  tool {response.name} -> {response.response}")
                if record is not None:
                    usage = event.usage_metadata
                    cached = (usage.cached_content_token_count or 0) if usage else 0
                    prompt = (usage.prompt_token_count or 0) if usage else 0
                    reason = f" ({record['bypass_reason']})" if "bypass_reason" in record else ""
                    print(f"  model call: cache {record['state']}{reason}, {cached}/{prompt} prompt tokens cached")
                    states.append(record["state"])
                if record is not None and event.content and not event.get_function_calls():
                    text = "".join(p.text or "" for p in event.content.parts or ())
                    print(f"  {event.author}: {text[:160]}")
    print("cache states:", " ".join(states))
    return states


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="127.0.0.1:50051", help="the context service")
    parser.add_argument("--certs", default=".agentctx/certs", type=pathlib.Path, help="the dev certificates")
    parser.add_argument("--app", default=f"adk-example-{uuid.uuid4().hex[:8]}", help="the ADK app name")
    args = parser.parse_args()
    asyncio.run(run(args.target, args.certs, args.app))


if __name__ == "__main__":
    main()
