"""An ADK agent on agentctx: an LlmAgent with two tools, run by ADK's
Runner on AgentCtxSessionService (sessions and events in the context
service), AgentCtxArtifactService and AgentCtxMemoryService (its artifacts
and memory there too) and AgentCtxLlm (model calls made by the context
service through the cache tier, the provider key on the service side).
Prints the cache state of every model call, the artifact a tool saved and
what memory finds of the conversation.

Run it in the ADK venv against the pair ``make up`` starts, with its
defaults (the local simulator model; its system prompt is the size real
agents send, so the first call records the prefix and later calls create,
hit and grow a cache):

    .venv/bin/python -m tests.adk.venv        # builds or reuses the ADK venv, prints its python
    .venv-adk/<hash>/bin/python examples/adk_agent.py [--target 127.0.0.1:50051] [--certs .agentctx/certs]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import uuid

from agentctx_adk import (
    CACHE_METADATA_KEY,
    AgentCtxArtifactService,
    AgentCtxLlm,
    AgentCtxMemoryService,
    AgentCtxPlugin,
    AgentCtxSessionService,
)
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from agentctx.context.v1 import policy_pb2
from agentctx_client import TlsConfig

MODEL = "local-sim-1"
# A system prompt of the size real agents send (their instructions, house
# rules and reference notes run to thousands of tokens): about 1,300 tokens,
# over the cache service's default floor (min_prefix_tokens 1,024), so the
# example caches with the defaults `make up` runs. A prompt under the floor
# is sent uncached: every call a BYPASS (BELOW_MIN_TOKENS).
_CITIES = (
    ("Paris", "EUR", "C/E", "French", "service is included; round up for good service"),
    ("Rome", "EUR", "C/F/L", "Italian", "a coperto is often on the bill; tipping is optional"),
    ("Madrid", "EUR", "C/F", "Spanish", "small change is appreciated, not expected"),
    ("Lisbon", "EUR", "C/F", "Portuguese", "5 to 10 percent in restaurants"),
    ("Berlin", "EUR", "C/F", "German", "round up and say the total when you pay"),
    ("Vienna", "EUR", "C/F", "German", "about 10 percent, said when paying"),
    ("Amsterdam", "EUR", "C/F", "Dutch", "round up; 5 to 10 percent for table service"),
    ("Prague", "CZK", "C/E", "Czech", "about 10 percent"),
    ("Budapest", "HUF", "C/F", "Hungarian", "10 to 15 percent unless a service charge is listed"),
    ("Copenhagen", "DKK", "C/E/F/K", "Danish", "service is included"),
    ("Stockholm", "SEK", "C/F", "Swedish", "service is included; round up if pleased"),
    ("London", "GBP", "G", "English", "12.5 percent is often added; check the bill"),
    ("Dublin", "EUR", "G", "English", "10 to 15 percent for table service"),
    ("Edinburgh", "GBP", "G", "English", "about 10 percent"),
    ("Zurich", "CHF", "C/J", "German", "service is included"),
    ("Athens", "EUR", "C/F", "Greek", "5 to 10 percent"),
    ("Istanbul", "TRY", "C/F", "Turkish", "5 to 10 percent, in cash"),
    ("New York", "USD", "A/B", "English", "18 to 22 percent"),
    ("Toronto", "CAD", "A/B", "English and French", "15 to 20 percent"),
    ("Mexico City", "MXN", "A/B", "Spanish", "10 to 15 percent"),
    ("Tokyo", "JPY", "A/B", "Japanese", "no tipping"),
    ("Seoul", "KRW", "C/F", "Korean", "no tipping"),
    ("Singapore", "SGD", "G", "English, Malay, Mandarin, Tamil", "a service charge is usually added"),
    ("Sydney", "AUD", "I", "English", "optional, about 10 percent for good service"),
    ("Melbourne", "AUD", "I", "English", "optional, about 10 percent for good service"),
    ("Auckland", "NZD", "I", "English and Maori", "not expected"),
    ("Bangkok", "THB", "A/B/C/O", "Thai", "round up; 10 percent in restaurants without a service charge"),
    ("Hanoi", "VND", "A/C", "Vietnamese", "small amounts are appreciated"),
    ("Marrakesh", "MAD", "C/E", "Arabic and French", "about 10 percent, in cash"),
    ("Cape Town", "ZAR", "C/M/N", "English, Afrikaans, Xhosa", "10 to 15 percent"),
    ("Buenos Aires", "ARS", "C/I", "Spanish", "about 10 percent, in cash"),
    ("Rio de Janeiro", "BRL", "C/N", "Portuguese", "10 percent is usually added"),
    ("Reykjavik", "ISK", "C/F", "Icelandic", "service is included"),
    ("Oslo", "NOK", "C/F", "Norwegian", "round up for good service"),
    ("Helsinki", "EUR", "C/F", "Finnish and Swedish", "not expected"),
    ("Warsaw", "PLN", "C/E", "Polish", "about 10 percent"),
)
INSTRUCTION = "\n".join([
    "You are a travel assistant for a small agency. You help travellers plan trips, check the weather "
    "and find what is worth seeing. Look facts up with your tools before you answer: call get_weather "
    "for any question about the weather or what to wear, and lookup for museums, sights, opening hours "
    "and anything else you would otherwise guess. Never invent a price, a schedule or an opening time.",
    "Answer in two or three sentences, in the traveller's language, and end with one practical tip. "
    "If a question is ambiguous (which city, which dates), ask one short question instead of guessing. "
    "Do not book anything; say which agent at the agency can, and that bookings need a confirmed date.",
    "House rules: be concise and friendly; no lists longer than five items; give temperatures in Celsius "
    "and distances in kilometres; mention visa or entry requirements only when asked, and then say that "
    "the traveller must confirm them with the embassy; never ask for passport numbers or card details.",
    "Reference notes per city (currency, plug types, language, tipping):",
    *(f"- {city}: currency {currency}; plugs {plugs}; language {language}; tipping: {tips}."
      for city, currency, plugs, language, tips in _CITIES),
    "Packing advice: layers for spring and autumn, a light rain jacket for northern Europe in any season, "
    "comfortable walking shoes everywhere, an adapter for the plug types above, and a small day bag. "
    "For museums, suggest booking a time slot ahead where the lookup tool says one is needed, and the "
    "first slot of the day for the busiest ones.",
])
QUESTIONS = (
    "Please call get_weather for Paris.",
    "Please call lookup for the best museums in Paris.",
    "Thanks. What should I pack for three days?",
    "And what else should I know before I go?",
)


def get_weather(city: str = "") -> dict[str, str]:
    """Current weather for a city."""
    return {"city": city or "Paris", "forecast": "sunny", "high_c": "24"}


async def lookup(tool_context: ToolContext, q: str = "") -> dict[str, str]:
    """Looks a fact up (and keeps the answer as an artifact of the session)."""
    answer = "The Louvre and the Musee d'Orsay."
    try:
        version = await tool_context.save_artifact("museums.md", types.Part(text=answer))
    except ValueError:  # a Runner without an artifact service (bench.adk runs these tools on ADK's own)
        return {"query": q, "answer": answer}
    return {"query": q, "answer": answer, "saved_as": f"museums.md v{version}"}


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
        artifacts, memory = AgentCtxArtifactService(sessions), AgentCtxMemoryService(sessions)
        runner = Runner(app=App(name=app_name, root_agent=agent, plugins=[AgentCtxPlugin(sessions)]),
                        session_service=sessions, artifact_service=artifacts, memory_service=memory)
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
        keys = await artifacts.list_artifact_keys(app_name=app_name, user_id="traveller", session_id=session.id)
        print("artifacts:", " ".join(keys))
        stored = await sessions.get_session(app_name=app_name, user_id="traveller", session_id=session.id)
        assert stored is not None
        await memory.add_session_to_memory(stored)
        found = await memory.search_memory(app_name=app_name, user_id="traveller", query="museums in Paris")
        print(f"memory: {len(found.memories)} entries match 'museums in Paris'")
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
