"""Exact wire checks of the Gemini adapter: the real google-genai SDK
against the fake Gemini REST server, which records every call."""

from __future__ import annotations

import datetime as dt
from typing import Any

import google.auth.credentials
import pytest

from agentctx_common.errors import InvalidArgument, PermissionDenied, ResourceExhausted, Unavailable
from cache_service.domain.generation import Generator
from cache_service.domain.keys import Prefix, PrefixView
from cache_service.domain.model import BypassReason, CacheSpec, CacheState, ModelCall
from cache_service.domain.ports import InvalidRequest
from cache_service.providers.gemini.adapter import GeminiProvider
from tests.cache.support import SYSTEM, scope
from tests.fakes.gemini_server import MISSING_MESSAGE, FakeGemini

MODEL = "gemini-2.5-flash"
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = ({"functionDeclarations": [{"name": "get_weather", "description": "Weather of a city.", "parameters": PARAMS}]},)
TOOL_CONFIG = {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
HISTORY = (
    {"role": "user", "parts": [{"text": "What is the weather in Paris? " * 8}]},
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "get_weather",
                                                     "response": {"sky": "clear", "celsius": 21}}}]},
    {"role": "model", "parts": [{"text": "It is clear and 21 degrees in Paris."}]},
)
SUFFIX = ({"role": "user", "parts": [{"text": "And tomorrow?"}]},)


def _gemini_scope() -> Any:
    return scope(model=MODEL, provider="gemini")


def _prefix() -> Prefix:
    return Prefix(MODEL, SYSTEM, TOOLS, TOOL_CONFIG, HISTORY)


def _call(generation: dict[str, Any] | None = None) -> ModelCall:
    return ModelCall(MODEL, (*HISTORY, *SUFFIX), SYSTEM, TOOLS, TOOL_CONFIG, generation or {})


async def _lease(h: Any) -> str:
    r = await h.acquire(PrefixView.of(_prefix()), _gemini_scope())
    assert r.info.state is CacheState.CREATED
    return r.lease


def _wire_content(c: dict[str, Any]) -> dict[str, Any]:
    """The SDK's JSON for one of our contents (parts before role)."""
    parts = []
    for p in c["parts"]:
        if "functionCall" in p:
            parts.append({"functionCall": p["functionCall"]})
        elif "functionResponse" in p:
            parts.append({"functionResponse": p["functionResponse"]})
        else:
            parts.append(p)
    return {"parts": parts, "role": c["role"]}


async def test_create_sends_contents_system_instruction_tools_and_ttl(gemini_harness, fake_gemini: FakeGemini) -> None:
    await _lease(gemini_harness)
    [create] = fake_gemini.calls_of("create")
    assert (create.method, create.path, create.query) == ("POST", "/v1beta/cachedContents", {})
    body = create.body
    assert body["model"] == f"models/{MODEL}"
    assert body["ttl"] == "300s"
    assert body["displayName"].startswith("agentctx-")
    assert body["contents"] == [_wire_content(c) for c in HISTORY]
    assert body["systemInstruction"] == {"parts": SYSTEM["parts"], "role": "user"}
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "get_weather", "description": "Weather of a city.", "parameters_json_schema": PARAMS}]}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}
    # The key travels only in its header (the fake checks it and drops it).
    assert "x-goog-api-key" not in create.headers and "key" not in create.query


async def test_generate_names_the_cache_and_omits_the_cached_fields(gemini_harness, fake_gemini: FakeGemini) -> None:
    lease = await _lease(gemini_harness)
    name = next(iter(fake_gemini.live_names()))
    reply, info = await Generator(gemini_harness.registry).generate(
        _gemini_scope(), _call({"temperature": 0.2, "maxOutputTokens": 64}), lease
    )
    [gen] = fake_gemini.calls_of("generate")
    assert gen.path == f"/v1beta/models/{MODEL}:generateContent"
    assert gen.body == {
        "contents": [_wire_content(c) for c in SUFFIX],
        "cachedContent": name,
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 64},
    }
    # cachedContentTokenCount is mapped, and is part of the prompt count.
    cached_tokens = fake_gemini.caches[name].tokens
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == cached_tokens
    assert reply.usage.prompt_tokens > cached_tokens
    assert info.state is CacheState.CREATED and reply.finish_reason == "STOP"


async def test_an_uncached_call_sends_the_whole_request(gemini_harness, fake_gemini: FakeGemini) -> None:
    reply, info = await Generator(gemini_harness.registry).generate(_gemini_scope(), _call(), "")
    [gen] = fake_gemini.calls_of("generate")
    assert "cachedContent" not in gen.body
    assert gen.body["contents"] == [_wire_content(c) for c in (*HISTORY, *SUFFIX)]
    assert gen.body["systemInstruction"]["parts"] == SYSTEM["parts"]
    assert gen.body["tools"] and gen.body["toolConfig"]
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == 0
    assert info.state is CacheState.UNSPECIFIED


async def test_stream_names_the_cache_and_reports_usage_once(gemini_harness, fake_gemini: FakeGemini) -> None:
    lease = await _lease(gemini_harness)
    chunks = [c async for c in Generator(gemini_harness.registry).stream(_gemini_scope(), _call(), lease)]
    [stream] = fake_gemini.calls_of("stream")
    assert (stream.path, stream.query) == (f"/v1beta/models/{MODEL}:streamGenerateContent", {"alt": ["sse"]})
    assert "cachedContent" in stream.body and "tools" not in stream.body
    assert len(chunks) > 1
    assert [c.usage is not None for c, _ in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1][1] is not None and chunks[-1][0].usage.cached_prompt_tokens > 0  # type: ignore[union-attr]


async def test_429_maps_to_resource_exhausted_with_retry_info(gemini_harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.fail("generate", 429, "Resource has been exhausted (e.g. check quota).", retry_delay="7s")
    with pytest.raises(ResourceExhausted) as err:
        await Generator(gemini_harness.registry).generate(_gemini_scope(), _call(), "")
    assert (err.value.reason, err.value.retry_after) == ("RATE_LIMITED", 7.0)
    assert len(fake_gemini.calls_of("generate")) == 1  # the SDK does not retry on its own


async def test_429_on_create_is_a_rate_limited_bypass(gemini_harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.fail("create", 429, "TotalCachedContentStorageTokensPerModelFreeTier limit=0")
    r = await gemini_harness.acquire(PrefixView.of(_prefix()), _gemini_scope())
    assert (r.info.state, r.info.bypass_reason) == (CacheState.BYPASS, BypassReason.RATE_LIMITED)
    assert len(fake_gemini.calls_of("create")) == 1


async def test_400_too_small_is_a_bypass_that_teaches_the_minimum(gemini_harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.fail_too_small()
    r = await gemini_harness.acquire(PrefixView.of(_prefix()), _gemini_scope())
    assert r.info.bypass_reason is BypassReason.BELOW_MIN_TOKENS
    r = await gemini_harness.acquire(PrefixView.of(_prefix()), _gemini_scope())
    assert r.info.bypass_reason is BypassReason.BELOW_MIN_TOKENS
    assert len(fake_gemini.calls_of("create")) == 1  # min_total_token_count=4096 was learned


@pytest.mark.parametrize("missing_status", [403, 404])
async def test_missing_cache_is_deleted_and_the_call_resent_uncached(gemini_harness, fake_gemini: FakeGemini,
                                                                     missing_status: int) -> None:
    lease = await _lease(gemini_harness)
    name = next(iter(fake_gemini.live_names()))
    fake_gemini.missing_status = missing_status
    fake_gemini.forget_caches()
    reply, info = await Generator(gemini_harness.registry).generate(_gemini_scope(), _call(), lease)
    first, second = fake_gemini.calls_of("generate")
    assert first.status == missing_status and first.body["cachedContent"] == name
    assert second.status == 200 and "cachedContent" not in second.body and second.body["tools"]
    assert (info.state, info.bypass_reason) == (CacheState.BYPASS, BypassReason.CACHE_MISSING)
    assert reply.usage is not None and reply.usage.cached_prompt_tokens == 0
    await gemini_harness.settle()
    [delete] = fake_gemini.calls_of("delete")
    assert delete.path == f"/v1beta/{name}"
    assert gemini_harness.journal.pending() == []


async def test_403_for_another_reason_is_an_error_and_not_retried(gemini_harness, fake_gemini: FakeGemini) -> None:
    lease = await _lease(gemini_harness)
    fake_gemini.fail("generate", 403, "The caller does not have permission")
    with pytest.raises(PermissionDenied) as err:
        await Generator(gemini_harness.registry).generate(_gemini_scope(), _call(), lease)
    assert err.value.reason == "PROVIDER_PERMISSION_DENIED"
    assert len(fake_gemini.calls_of("generate")) == 1
    assert (await gemini_harness.registry.entry_count()) == 1


async def test_stream_missing_cache_before_output_is_resent_after_output_is_not(gemini_harness,
                                                                              fake_gemini: FakeGemini) -> None:
    gen = Generator(gemini_harness.registry)
    lease = await _lease(gemini_harness)
    fake_gemini.fail("stream", 403, MISSING_MESSAGE, after_chunks=2)
    seen = []
    with pytest.raises(Unavailable) as err:
        async for chunk, _ in gen.stream(_gemini_scope(), _call(), lease):
            seen.append(chunk)
    assert err.value.reason == "CACHE_MISSING"
    assert len(fake_gemini.calls_of("stream")) == 1 and len(seen) >= 1
    # Before any output: one resend, uncached.
    lease = await _lease(gemini_harness)
    fake_gemini.forget_caches()
    chunks = [c async for c in gen.stream(_gemini_scope(), _call(), lease)]
    streams = fake_gemini.calls_of("stream")
    assert len(streams) == 3 and "cachedContent" not in streams[-1].body
    assert chunks[-1][1] is not None and chunks[-1][1].bypass_reason is BypassReason.CACHE_MISSING


async def test_context_window_overflow_has_its_own_reason_and_figures(gemini_harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.fail_context_window(prompt_tokens=1_200_000, window=1_048_576)
    with pytest.raises(InvalidArgument) as err:
        await Generator(gemini_harness.registry).generate(_gemini_scope(), _call(), "")
    assert err.value.reason == "CONTEXT_WINDOW_EXCEEDED"
    assert err.value.metadata == {"prompt_tokens": "1200000", "context_window": "1048576"}


async def test_ttl_refresh_and_delete_on_the_wire(gemini_harness, fake_gemini: FakeGemini) -> None:
    h = gemini_harness
    await _lease(h)
    name = next(iter(fake_gemini.live_names()))
    h.clock.advance(200)
    r = await h.acquire(PrefixView.of(_prefix()), _gemini_scope())
    assert r.info.state is CacheState.HIT
    await h.settle()
    [update] = fake_gemini.calls_of("update")
    assert (update.method, update.path, update.body) == ("PATCH", f"/v1beta/{name}", {"ttl": "300s"})
    await h.registry.invalidate(_gemini_scope())
    await h.settle()
    [delete] = fake_gemini.calls_of("delete")
    assert (delete.method, delete.path) == ("DELETE", f"/v1beta/{name}")
    await h.assert_in_step()


async def test_list_reads_display_names(fake_gemini: FakeGemini) -> None:
    provider = GeminiProvider(api_key=fake_gemini.api_key, base_url=fake_gemini.base_url)
    spec = CacheSpec(MODEL, SYSTEM, (), None, HISTORY, 60, "agentctx-abc")
    handle = await provider.create_cache(spec)
    listed = await provider.list_caches()
    assert [(c.name, c.display_name) for c in listed] == [(handle.name, "agentctx-abc")]
    assert listed[0].expire_time == pytest.approx(handle.expire_time, abs=1)
    await provider.close()


async def test_a_wrong_api_key_is_refused_without_echoing_it(fake_gemini: FakeGemini) -> None:
    provider = GeminiProvider(api_key="wrong-key-123", base_url=fake_gemini.base_url)
    with pytest.raises(InvalidRequest) as err:
        await provider.generate(_call(), None)
    assert "wrong-key-123" not in str(err.value) and err.value.__cause__ is None
    await provider.close()


class _StaticToken(google.auth.credentials.Credentials):
    """Google auth credentials that hand out a fixed token (no network)."""

    def refresh(self, request: object) -> None:
        self.token = "vertex-test-token"
        self.expiry = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(hours=1)


async def test_vertex_ai_paths(fake_gemini: FakeGemini) -> None:
    provider = GeminiProvider(vertexai=True, project="proj", location="us-central1", credentials=_StaticToken(),
                              base_url=fake_gemini.base_url)
    handle = await provider.create_cache(CacheSpec(MODEL, SYSTEM, TOOLS, None, HISTORY, 120, "agentctx-v"))
    reply = await provider.generate(ModelCall(MODEL, SUFFIX), handle.name)
    await provider.delete_cache(handle.name)
    create, gen, delete = fake_gemini.calls
    base = "/v1beta1/projects/proj/locations/us-central1"
    assert create.path == f"{base}/cachedContents"
    assert create.body["model"] == f"projects/proj/locations/us-central1/publishers/google/models/{MODEL}"
    assert gen.path == f"{base}/publishers/google/models/{MODEL}:generateContent"
    assert gen.body["cachedContent"].startswith(f"{base[len('/v1beta1/'):]}/cachedContents/")
    assert delete.path.startswith(f"{base}/cachedContents/")
    assert reply.usage is not None and reply.usage.cached_prompt_tokens > 0
    await provider.close()
