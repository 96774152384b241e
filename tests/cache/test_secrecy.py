"""Provider resource names and the API key never leave the cache process.

A full scenario runs through gRPC against the fake Gemini server (creates,
hits, cached and streamed calls, a lost cache, provider errors whose text
names the cache and the key, invalidation), and every response, error
status, log record and exported span is scanned for the fake's resource
name pattern and the API key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx_common.logs import JsonFormatter
from tests.cache import protos
from tests.fakes.gemini_server import NAME_MARK, FakeGemini

MODEL = "gemini-2.5-flash"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._json = JsonFormatter()

    def emit(self, record: logging.LogRecord) -> None:
        # Everything a formatter could print: message, args, extras, exception.
        self.lines.append(self._json.format(record))
        self.lines.append(repr(record.__dict__))


@pytest.fixture
def captured_logs() -> Iterator[_Capture]:
    handler = _Capture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def _forbidden(fake: FakeGemini) -> list[str]:
    return [fake.api_key, "cachedContents/", NAME_MARK, *fake.caches.keys(), *fake.deleted]


async def test_no_resource_name_or_api_key_escapes(cache_rpc, fake_gemini: FakeGemini, captured_logs: _Capture,
                                                    span_exporter) -> None:
    span_exporter.clear()
    stub, app, _ = await cache_rpc(default_provider="gemini", gemini_api_key=fake_gemini.api_key,
                                   gemini_base_url=fake_gemini.base_url, gemini_min_cache_tokens=64,
                                   sightings_before_create=1, log_level="DEBUG")
    outputs: list[Any] = []

    async def call(coro: Any) -> Any:
        try:
            reply = await coro
        except grpc.aio.AioRpcError as err:
            outputs.extend([err.details(), err.debug_error_string(), str(err.trailing_metadata()),
                            str(err.initial_metadata())])
            return None
        outputs.append(reply)
        return reply

    def key_and_name_in_message(status: int) -> None:
        name = next(iter(fake_gemini.live_names()), "cachedContents/fakecache-000")
        fake_gemini.fail("generate", status, f"problem with {name} for key {fake_gemini.api_key}")

    # Turn 1: first sighting; turn 2: created; turn 3: hit.
    for turns in (2, 3, 3):
        await call(stub.AcquireLease(protos.acquire(turns, model=MODEL)))
    lease = outputs[-1].lease
    await call(stub.ResolveLease(pb.ResolveLeaseRequest(lease=lease)))
    await call(stub.GenerateContent(protos.generate(3, lease, model=MODEL)))
    stream = stub.StreamGenerateContent(pb.StreamGenerateContentRequest(call=protos.generate(3, lease, model=MODEL)))
    outputs.extend([c async for c in stream])
    # Provider errors whose text names the cache and the key.
    for status in (400, 403, 429, 500):
        key_and_name_in_message(status)
        await call(stub.GenerateContent(protos.generate(3, lease, model=MODEL)))
    fake_gemini.fail("create", 400, f"bad cache request, key {fake_gemini.api_key}")
    await call(stub.AcquireLease(protos.acquire(4, model=MODEL, user="u2")))
    await call(stub.AcquireLease(protos.acquire(4, model=MODEL, user="u2")))
    # A lost cache: resent uncached, then a stream that loses it after output.
    fake_gemini.forget_caches()
    await call(stub.GenerateContent(protos.generate(3, lease, model=MODEL)))
    lease = (await call(stub.AcquireLease(protos.acquire(3, model=MODEL)))).lease
    fake_gemini.fail("stream", 403, "CachedContent not found (or permission denied)", after_chunks=1)
    try:
        async for chunk in stub.StreamGenerateContent(
                pb.StreamGenerateContentRequest(call=protos.generate(3, lease, model=MODEL))):
            outputs.append(chunk)
    except grpc.aio.AioRpcError as err:
        outputs.extend([err.details(), str(err.trailing_metadata())])
    await call(stub.GenerateContent(protos.generate(3, "v1.forged.lease", model=MODEL)))
    await call(stub.GetScopeStatus(pb.GetScopeStatusRequest(scope=protos.scope(MODEL))))
    await call(stub.InvalidateScope(pb.InvalidateScopeRequest(scope=protos.scope(MODEL))))
    await call(stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=lease)))
    await app.janitor.drain()
    await asyncio.sleep(0.05)

    # The scenario did exercise the provider: creates, deletes, cached calls.
    assert len(fake_gemini.calls_of("create")) >= 3 and fake_gemini.calls_of("delete")
    assert any("cachedContent" in c.body for c in fake_gemini.calls_of("generate"))
    texts = []
    for out in outputs:
        if isinstance(out, str):
            texts.append(out)
        else:
            texts.append(json_format.MessageToJson(out))
            texts.append(out.SerializeToString().decode("utf-8", errors="replace"))
    spans = span_exporter.get_finished_spans()
    assert spans
    for span in spans:
        texts.append(span.to_json())
    texts += captured_logs.lines
    assert captured_logs.lines and len(texts) > 40
    blob = "\n".join(texts)
    for secret in _forbidden(fake_gemini):
        assert secret not in blob, f"{secret[:16]}... leaked"


async def test_no_anthropic_or_openai_key_escapes(cache_rpc, captured_logs: _Capture, span_exporter,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The same scan over Claude and an OpenAI-compatible server (a named
    route whose key is in the environment), with provider errors whose text
    echoes the key and the prompt."""
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.openai_server import FakeOpenAI

    span_exporter.clear()
    with FakeAnthropic(min_cache_tokens=64) as claude, FakeOpenAI(min_cache_tokens=64) as gpt, \
            FakeOpenAI(min_cache_tokens=64, flavor="vllm") as vllm:
        monkeypatch.setenv("AGENTCTX_TEST_VLLM_KEY", vllm.api_key)
        stub, app, _ = await cache_rpc(
            anthropic_api_key=claude.api_key, anthropic_base_url=claude.base_url, anthropic_min_cache_tokens=64,
            openai_api_key=gpt.api_key, openai_base_url=f"{gpt.base_url}/v1", openai_min_cache_tokens=64,
            routes=[{"pattern": "qwen*", "provider": "openai", "name": "vllm", "base_url": f"{vllm.base_url}/v1",
                     "api_key_env": "AGENTCTX_TEST_VLLM_KEY"}],
            sightings_before_create=1, log_level="DEBUG")
        outputs: list[Any] = []

        async def call(coro: Any) -> Any:
            try:
                reply = await coro
            except grpc.aio.AioRpcError as err:
                outputs.extend([err.details(), err.debug_error_string(), str(err.trailing_metadata())])
                return None
            outputs.append(reply)
            return reply

        fakes = {"claude-sonnet-4-5": claude, "gpt-5-mini": gpt, "qwen3-8b": vllm}
        for model, fake in fakes.items():
            for turns in (2, 3):
                await call(stub.AcquireLease(protos.acquire(turns, model=model)))
            lease = outputs[-1].lease
            await call(stub.GenerateContent(protos.generate(3, lease, model=model)))
            outputs.extend([c async for c in stub.StreamGenerateContent(
                pb.StreamGenerateContentRequest(call=protos.generate(3, lease, model=model)))])
            for status in (400, 401, 429, 500):
                echo = f"request with key {fake.api_key} said: {protos.SYSTEM_TEXT[:40]}"
                if isinstance(fake, FakeAnthropic):
                    fake.fail("generate", status, "invalid_request_error", echo, retry_after="1")
                else:
                    fake.fail("generate", status, echo, retry_after="1")
                await call(stub.GenerateContent(protos.generate(3, lease, model=model)))
            await call(stub.InvalidateScope(pb.InvalidateScopeRequest(scope=protos.scope(model))))
        await app.janitor.drain()

        assert all(f.calls_of("generate") for f in fakes.values())
        assert any("cache_control" in str(c.body) for c in claude.calls_of("generate"))
        texts = [o if isinstance(o, str) else json_format.MessageToJson(o) for o in outputs]
        texts += [s.to_json() for s in span_exporter.get_finished_spans()]
        texts += captured_logs.lines
        texts.append(repr(app.providers) + repr(app.settings))
        blob = "\n".join(texts)
        assert captured_logs.lines and len(texts) > 30
        for secret in (claude.api_key, gpt.api_key, vllm.api_key, "said:"):
            assert secret not in blob, f"{secret[:10]}... leaked"
