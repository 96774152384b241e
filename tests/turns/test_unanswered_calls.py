"""An agent that sends a user message instead of a tool's result does not
poison its session (issue 21): every later turn reaches Anthropic and
OpenAI (their fakes refuse unpaired calls as the providers do) with the
call answered by a synthesized response, never stored."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.canonical import content_json
from cache_service.domain.model import ModelCall
from cache_service.providers.anthropic.wire import _messages as anthropic_messages
from cache_service.providers.openai.wire import _messages as openai_messages
from context_service.domain.selection import NOT_ANSWERED
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.tool_rules import anthropic_violation, gemini_violation, openai_violation
from tests.turns.builders import Agent, calls_of, create_session

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-mini"}


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_a_user_message_instead_of_the_result_leaves_the_session_usable(
    pair_factory: Callable[..., Any], vendor: str
) -> None:
    fake: Any = FakeAnthropic(min_cache_tokens=64) if vendor == "anthropic" else FakeOpenAI(min_cache_tokens=64)
    base_url = fake.start() if vendor == "anthropic" else f"{fake.start()}/v1"
    try:
        pair = await pair_factory(cache={f"{vendor}_api_key": fake.api_key, f"{vendor}_base_url": base_url,
                                         f"{vendor}_min_cache_tokens": 64})
        session = await create_session(pair.stub, user=f"u-{uuid.uuid4().hex[:8]}", model=MODELS[vendor])
        agent = Agent(pair.stub, session.name)
        first = await agent.send(agent.request("Please call lookup for the next ferry."))
        agent.turns += 1
        (call,) = calls_of(first.reply)
        # The agent never runs the tool: it sends user messages instead.
        for i, text in enumerate(["Never mind, what time is it?", "And tomorrow?", "Thanks."]):
            agent.stream = i == 1
            reply = (await agent.send(agent.request(text))).reply
            agent.turns += 1
            assert reply.content.parts[0].text.startswith("fake reply"), reply

        sent = [c.body for c in fake.calls_of("generate") + fake.calls_of("stream")]
        assert len(sent) == 4
        for body in sent[1:]:
            assert NOT_ANSWERED in json.dumps(body), "the call is answered in every later request"
            assert call.id in json.dumps(body)

        # The built context (what BuildContext answers) pairs for every provider.
        built = await pair.stub.BuildContext(pb.BuildContextRequest(session=session.name))
        wire = tuple(content_json(c) for c in built.request.contents)
        assert anthropic_violation(anthropic_messages(wire)) is None
        assert openai_violation(openai_messages(ModelCall("m", wire))) is None
        assert gemini_violation(wire) is None

        # Nothing of it is stored.
        events = (await pair.stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=100))).events
        assert not [p for e in events for p in e.content.parts if p.HasField("function_response")]
    finally:
        fake.stop()
