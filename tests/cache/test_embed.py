"""Embed: the local simulator's deterministic vectors, the Gemini and
OpenAI adapters with their real SDKs against the strict fakes (what the
real APIs refuse, refused with their error shapes and mapped to our
reasons), the checks made before anything is sent, and the RPC on a real
cache server (Anthropic: no embedding API, FAILED_PRECONDITION)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx_common.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from cache_service.domain import embedding
from cache_service.domain.ports import EmbedCall, EmbedTask, InvalidRequest
from cache_service.providers.anthropic.adapter import AnthropicProvider
from cache_service.providers.gemini.adapter import GeminiProvider
from cache_service.providers.local.adapter import LocalProvider, embed_text
from cache_service.providers.openai.adapter import OpenAIProvider
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI, fake_vector


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# --- the local simulator -------------------------------------------------------------


def test_local_vectors_are_deterministic_unit_length_and_sized() -> None:
    a = embed_text("Ana lives in Porto near the old harbour")
    assert a == embed_text("Ana lives in Porto near the old harbour")
    assert len(a) == 256 and math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)
    assert len(embed_text("Ana lives in Porto", 64)) == 64


def test_local_related_texts_score_higher_than_unrelated_ones() -> None:
    fact = embed_text("Bruno Costa is allergic to peanuts")
    related = embed_text("Which allergy does Bruno Costa have?")  # a shared name and stem (aller-)
    unrelated = embed_text("Greta Haas drives a silver convertible")
    assert _cos(fact, related) > _cos(fact, unrelated) + 0.2
    # The stem carries beyond the name: the same question about another person.
    other = embed_text("Which allergy does Greta Haas have?")
    assert _cos(fact, other) > _cos(fact, unrelated)


async def test_local_embed_call_and_its_refusals() -> None:
    provider = LocalProvider()
    result = await embedding.embed(provider, EmbedCall("local-sim-embed", ("one text", "another text"),
                                                       EmbedTask.RETRIEVAL_DOCUMENT, 32), 5.0)
    assert [len(v) for v in result.vectors] == [32, 32] and result.vectors[0] == embed_text("one text", 32)
    assert result.input_tokens > 0
    with pytest.raises(InvalidArgument) as err:
        await embedding.embed(provider, EmbedCall("gpt-4o", ("x",)), 5.0)
    assert err.value.reason is Reason.PROVIDER_INVALID_REQUEST


@pytest.mark.parametrize(("texts", "field"), [
    ((), "texts"), (("fine", "  "), "texts[1]"), (("x",) * 257, "texts"),
])
async def test_requests_a_provider_refuses_are_refused_before_sending(texts: tuple[str, ...], field: str) -> None:
    provider = LocalProvider()
    with pytest.raises(InvalidArgument) as err:
        await embedding.embed(provider, EmbedCall("local-sim-embed", texts), 5.0)
    assert err.value.reason is Reason.INVALID_EMBED_REQUEST
    assert field in [v.field for v in err.value.field_violations]
    assert provider.counts["embed"] == 0


async def test_a_provider_without_embeddings_is_a_failed_precondition() -> None:
    with FakeAnthropic() as fake:
        provider = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url)
        try:
            with pytest.raises(FailedPrecondition) as err:
                await embedding.embed(provider, EmbedCall("claude-sonnet-4-5", ("hello",)), 5.0)
        finally:
            await provider.close()
        assert not fake.calls
    assert err.value.reason is Reason.EMBEDDINGS_NOT_SUPPORTED and err.value.metadata == {"provider": "anthropic"}


# --- Gemini --------------------------------------------------------------------------


@pytest.fixture
async def gemini(fake_gemini: FakeGemini) -> Any:
    provider = GeminiProvider(api_key=fake_gemini.api_key, base_url=fake_gemini.base_url, request_timeout_s=10)
    yield provider
    await provider.close()


async def test_gemini_batch_embeds_with_task_and_dimensions(gemini: GeminiProvider, fake_gemini: FakeGemini) -> None:
    call = EmbedCall("gemini-embedding-001", ("first", "second", "third"), EmbedTask.RETRIEVAL_QUERY, 256)
    result = await embedding.embed(gemini, call, 10.0)
    assert [len(v) for v in result.vectors] == [256] * 3
    assert len(set(result.vectors)) == 3
    [sent] = fake_gemini.calls_of("embed")
    assert sent.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert [r["taskType"] for r in sent.body["requests"]] == ["RETRIEVAL_QUERY"] * 3
    assert {r["outputDimensionality"] for r in sent.body["requests"]} == {256}
    default = await embedding.embed(gemini, EmbedCall("text-embedding-004", ("x",)), 10.0)
    assert len(default.vectors[0]) == 768 and fake_gemini.embed_tasks[-1] == "TASK_TYPE_UNSPECIFIED"


async def test_gemini_unknown_model_is_the_apis_404(gemini: GeminiProvider, fake_gemini: FakeGemini) -> None:
    with pytest.raises(InvalidArgument) as err:
        await embedding.embed(gemini, EmbedCall("gemini-embedding-999", ("x",)), 10.0)
    assert err.value.reason is Reason.PROVIDER_INVALID_REQUEST and err.value.metadata == {"provider_status": "404"}
    assert fake_gemini.calls_of("embed")[0].status == 404


@pytest.mark.parametrize("texts", [("x",) * 101, ("x", "")])
async def test_the_gemini_fake_refuses_what_the_api_refuses(gemini: GeminiProvider, fake_gemini: FakeGemini,
                                                            texts: tuple[str, ...]) -> None:
    # Straight to the adapter, past the checks that keep these from being sent.
    with pytest.raises(InvalidRequest) as err:
        await gemini.embed(EmbedCall("gemini-embedding-001", texts))
    assert err.value.status == 400 and fake_gemini.calls_of("embed")[-1].status == 400


async def test_gemini_rate_limit_keeps_its_retry_hint(gemini: GeminiProvider, fake_gemini: FakeGemini) -> None:
    fake_gemini.fail("embed", 429, retry_delay="4s")
    with pytest.raises(ResourceExhausted) as err:
        await embedding.embed(gemini, EmbedCall("gemini-embedding-001", ("x",)), 10.0)
    assert err.value.reason is Reason.RATE_LIMITED and err.value.retry_after == 4.0


# --- OpenAI --------------------------------------------------------------------------


@pytest.fixture
def fake_openai() -> Any:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def openai_provider(fake_openai: FakeOpenAI) -> Any:
    provider = OpenAIProvider(api_key=fake_openai.api_key, base_url=f"{fake_openai.base_url}/v1")
    yield provider
    await provider.close()


async def test_openai_embeds_in_order_through_base64(openai_provider: OpenAIProvider, fake_openai: FakeOpenAI) -> None:
    result = await embedding.embed(openai_provider, EmbedCall("text-embedding-3-small", ("a b", "c d"),
                                                              EmbedTask.RETRIEVAL_DOCUMENT, 64), 10.0)
    [sent] = fake_openai.calls_of("embed")
    assert sent.body["encoding_format"] == "base64" and sent.body["dimensions"] == 64
    assert "authorization" not in sent.headers
    for vector, text in zip(result.vectors, ("a b", "c d"), strict=True):
        assert vector == pytest.approx(fake_vector("text-embedding-3-small", text, 64), abs=1e-6)
    assert result.input_tokens > 0
    native = await embedding.embed(openai_provider, EmbedCall("text-embedding-3-large", ("x",)), 10.0)
    assert len(native.vectors[0]) == 3072 and "dimensions" not in fake_openai.calls_of("embed")[-1].body


@pytest.mark.parametrize(("call", "status"), [
    (EmbedCall("text-embedding-4-imaginary", ("x",)), 404),
    (EmbedCall("text-embedding-ada-002", ("x",), dimensions=256), 400),
])
async def test_openai_refusals_map_to_invalid_argument(openai_provider: OpenAIProvider, fake_openai: FakeOpenAI,
                                                       call: EmbedCall, status: int) -> None:
    with pytest.raises(InvalidArgument) as err:
        await embedding.embed(openai_provider, call, 10.0)
    assert err.value.reason is Reason.PROVIDER_INVALID_REQUEST and err.value.metadata == {"provider_status": str(status)}


@pytest.mark.parametrize("texts", [("x",) * 2049, ("x", ""), ()])
async def test_the_openai_fake_refuses_what_the_api_refuses(openai_provider: OpenAIProvider, fake_openai: FakeOpenAI,
                                                            texts: tuple[str, ...]) -> None:
    with pytest.raises(InvalidRequest) as err:
        await openai_provider.embed(EmbedCall("text-embedding-3-small", texts))
    assert err.value.status == 400
    assert fake_openai.calls_of("embed")[-1].status == 400


# --- the RPC on a real cache server ------------------------------------------------------


async def test_embed_rpc(cache_rpc: Callable[..., Any]) -> None:
    with FakeAnthropic() as fake:
        anthropic = AnthropicProvider(api_key=fake.api_key, base_url=fake.base_url)
        stub, _, _ = await cache_rpc(providers={"local": LocalProvider(), "anthropic": anthropic})
        response = await stub.Embed(pb.EmbedRequest(model="local-sim-embed", texts=["pet parrot", "a parrot"],
                                                    task=pb.EMBED_TASK_RETRIEVAL_QUERY))
        assert response.model == "local-sim-embed" and len(response.embeddings) == 2
        assert list(response.embeddings[0].values) == pytest.approx(embed_text("pet parrot"), abs=1e-6)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Embed(pb.EmbedRequest(provider="anthropic", model="claude-sonnet-4-5", texts=["hello"]))
        assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_from_rpc(err.value).reason is Reason.EMBEDDINGS_NOT_SUPPORTED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Embed(pb.EmbedRequest(model="local-sim-embed", texts=["ok", ""]))
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error_from_rpc(err.value).reason is Reason.INVALID_EMBED_REQUEST
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Embed(pb.EmbedRequest(model="local-sim-embed", texts=["ok"], dimensions=-1))
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert not fake.calls
