"""Nothing the context service says, stores, logs or traces holds a
provider resource name, an API key or a pruned secret.

Both services run as real processes, the cache service on the Gemini
adapter against the fake Gemini REST server (real ``cachedContents/...``
names, a real API key header). The scenario creates and hits caches,
streams, compacts, loses a cache at the provider and meets a provider error
whose text names a cache and the key. Every response and error status, every
event the service wrote, and the context service's whole output (DEBUG logs
and console-exported spans) are scanned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import cache_pb2, content_pb2, event_pb2
from tests.fakes.gemini_server import NAME_MARK, FakeGemini
from tests.turns.builders import Agent, create_session

MODEL = "gemini-2.5-flash"
SECRET = "pw-3c1a7f0e-never-to-the-model"


@pytest.fixture
def fake_gemini() -> Iterator[FakeGemini]:
    with FakeGemini(min_cache_tokens=64) as fake:
        yield fake


class Outputs:
    """Everything the agent received, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, message: Any) -> Any:
        self.texts.append(json_format.MessageToJson(message))
        self.texts.append(message.SerializeToString().decode("utf-8", "replace"))
        return message

    def add_error(self, err: grpc.aio.AioRpcError) -> None:
        self.texts.append(f"{err.code()} {err.details()} {err.trailing_metadata()!r}")


async def test_no_resource_name_api_key_or_pruned_secret_escapes(services, fake_gemini: FakeGemini) -> None:
    pair = services(
        context={"log_level": "DEBUG", "telemetry_exporter": "console"},
        cache={"default_provider": "gemini", "gemini_api_key": fake_gemini.api_key,
               "gemini_base_url": fake_gemini.base_url, "gemini_min_cache_tokens": 64},
    )
    out = Outputs()
    async with pair.channel() as channel:
        stub = pair.stub(channel)
        compaction = policy_pb2.CompactionPolicy(enabled=True, event_threshold=10, keep_recent_tokens=200)
        session = out.add(await create_session(stub, model=MODEL, compaction=compaction))
        agent = Agent(stub, session.name, secret=SECRET)
        out.add(await agent.turn("Hello, I need help with my account settings."))
        out.add(await agent.turn("Tell me what you can do for me, in detail, please."))
        # The agent ran a tool itself: its call, then its result (with credentials) as input.
        call = content_pb2.FunctionCall(id="c-1", name="lookup", args={"q": "account"})
        out.add(await stub.AppendEvent(pb.AppendEventRequest(parent=session.name, event=event_pb2.Event(
            id="call-1", author="model", content=content_pb2.Content(role="model", parts=[content_pb2.Part(function_call=call)]),
        ))))
        agent.pending = [call]
        out.add(await agent.turn())
        for i in range(3):
            agent.stream = i == 1
            out.add(await agent.turn(f"Next question number {i}, about the same account."))
        agent.stream = False

        name = next(iter(fake_gemini.live_names()))
        fake_gemini.fail("generate", 500, f"internal problem with {name} for key {fake_gemini.api_key}")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await agent.turn("This one meets a provider error.")
        out.add_error(info.value)
        out.add(await agent.turn("This one meets a provider error."))
        fake_gemini.forget_caches()
        lost = out.add(await agent.turn("And after the provider lost its caches?"))
        out.add(await stub.BuildContext(pb.BuildContextRequest(
            session=session.name, input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="?")])],
        )))
        events = (await stub.ListEvents(pb.ListEventsRequest(
            parent=session.name, include_compactions=True, page_size=1000,
        ))).events
    pair.stop()  # SIGTERM: the console span exporter flushes

    # The scenario really used caches, compacted, and lost a cache.
    assert fake_gemini.calls_of("create") and any("cachedContent" in c.body for c in fake_gemini.calls_of("generate"))
    states = {e.cache_metadata.state for e in events if e.author == "model"}
    assert cache_pb2.CACHE_STATE_CREATED in states and cache_pb2.CACHE_STATE_HIT in states
    assert lost.reply.cache_metadata.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_CACHE_MISSING
    assert any(e.kind == event_pb2.EVENT_KIND_COMPACTION for e in events)
    # The credential is in the agent's own stored input, and was pruned before the provider.
    assert any(SECRET in json_format.MessageToJson(e) for e in events if e.author == "user")
    assert not any(SECRET in repr(c.body) for c in fake_gemini.calls)

    output = pair.context_log.read_text()
    assert '"msg": "turn"' in output or '"msg":"turn"' in output, "DEBUG logs were captured"
    assert '"name": "turn"' in output, "spans were exported"
    forbidden = [fake_gemini.api_key, "cachedContents/", NAME_MARK, *fake_gemini.caches, *fake_gemini.deleted]
    written = [json_format.MessageToJson(e) for e in events if e.author != "user"]  # the agent's own input is its own
    for text in [*out.texts, *written, output]:
        for secret in forbidden:
            assert secret not in text, secret[:24]
    for text in [*written, output]:
        assert SECRET not in text


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_no_anthropic_or_openai_key_escapes(services, vendor: str) -> None:
    """The same scan with the session's model on Claude or an OpenAI model:
    the cache service routes it by name, and neither service's output, nor
    any response or stored event, holds the key; the provider's error text
    (which echoes the key) never comes back."""
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.openai_server import FakeOpenAI

    fake: Any = FakeAnthropic(min_cache_tokens=64) if vendor == "anthropic" else FakeOpenAI(min_cache_tokens=64)
    model = "claude-sonnet-4-5" if vendor == "anthropic" else "gpt-5-mini"
    base_url = fake.start() if vendor == "anthropic" else f"{fake.start()}/v1"
    try:
        pair = services(
            context={"log_level": "DEBUG", "telemetry_exporter": "console"},
            cache={f"{vendor}_api_key": fake.api_key, f"{vendor}_base_url": base_url,
                   f"{vendor}_min_cache_tokens": 64, "log_level": "DEBUG"},
        )
        out = Outputs()
        async with pair.channel() as channel:
            stub = pair.stub(channel)
            session = out.add(await create_session(stub, model=model))
            agent = Agent(stub, session.name, secret=SECRET)
            for i in range(4):
                agent.stream = i == 2
                out.add(await agent.turn(f"Question number {i} about the same account, in some detail."))
            agent.stream = False
            if vendor == "anthropic":
                fake.fail("generate", 500, "api_error", f"problem for key {fake.api_key}")
            else:
                fake.fail("generate", 500, f"problem for key {fake.api_key}")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await agent.turn("This one meets a provider error.")
            out.add_error(info.value)
            events = (await stub.ListEvents(pb.ListEventsRequest(parent=session.name, page_size=1000))).events
        pair.stop()
    finally:
        fake.stop()

    states = {e.cache_metadata.state for e in events if e.author == "model"}
    assert cache_pb2.CACHE_STATE_CREATED in states and cache_pb2.CACHE_STATE_HIT in states
    if vendor == "anthropic":
        assert any("cache_control" in repr(c.body) for c in fake.calls_of("generate"))
    else:
        assert all(c.body.get("prompt_cache_key") for c in fake.calls_of("generate") + fake.calls_of("stream"))
    assert not any(SECRET in repr(c.body) for c in fake.calls)
    written = [json_format.MessageToJson(e) for e in events if e.author != "user"]
    for text in [*out.texts, *written, pair.context_log.read_text(), pair.cache_log.read_text()]:
        assert fake.api_key not in text
