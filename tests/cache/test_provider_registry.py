"""The provider registry and the error table every SDK adapter shares
(cache_service.providers.registry, .errors): each registered kind is known
to the router and validated by its own route model, and each SDK's errors
land on the same row for the same status."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2 as httpx
import openai
import pytest
from google.genai import errors as genai_errors
from pydantic import TypeAdapter, ValidationError

from cache_service.domain.ports import (
    CacheNotFound,
    ContextWindowExceeded,
    InvalidRequest,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from cache_service.providers.anthropic.errors import AnthropicErrors
from cache_service.providers.errors import ErrorMap
from cache_service.providers.gemini.errors import GeminiErrors
from cache_service.providers.openai.errors import OpenAIErrors
from cache_service.providers.registry import BY_KIND, PROVIDERS, RouteEntry
from cache_service.providers.routes import make_router

_REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1")


def test_every_registered_kind_is_known_and_validated_by_its_route_model() -> None:
    router = make_router([], "local", [])
    rows = TypeAdapter(list[RouteEntry])
    for plugin in PROVIDERS:
        for kind in plugin.kinds:
            assert kind in router.known
            [route] = rows.validate_python([{"pattern": "m*", "provider": kind}])
            assert type(route) is plugin.route and BY_KIND[kind] is plugin
    with pytest.raises(ValidationError):
        rows.validate_python([{"pattern": "m*", "provider": "nobody"}])


def _anthropic(status: int, message: str = "") -> BaseException:
    response = httpx.Response(status, request=_REQUEST, headers={"retry-after": "3"})
    return anthropic.APIStatusError(message, response=response, body={"error": {"type": "x", "message": message}})


def _openai(status: int, message: str = "", code: str = "") -> BaseException:
    response = httpx.Response(status, request=_REQUEST, headers={"retry-after": "3"})
    return openai.APIStatusError(message, response=response, body={"message": message, "code": code})


def _gemini(status: int, message: str = "") -> BaseException:
    return genai_errors.APIError(status, {"error": {"code": status, "message": message}})


_SDKS: list[tuple[ErrorMap, Any]] = [(AnthropicErrors(), _anthropic), (OpenAIErrors(), _openai),
                                     (GeminiErrors(), _gemini)]


@pytest.mark.parametrize(("errors", "make"), _SDKS, ids=["anthropic", "openai", "gemini"])
@pytest.mark.parametrize(("status", "expected"), [
    (429, RateLimited), (401, ProviderPermissionDenied), (403, ProviderPermissionDenied), (400, InvalidRequest),
    (404, InvalidRequest), (408, ProviderUnavailable), (500, ProviderUnavailable), (503, ProviderUnavailable),
])
def test_one_status_table_for_every_sdk(errors: ErrorMap, make: Any, status: int,
                                        expected: type[ProviderError]) -> None:
    found = errors.classify(make(status, "details that may echo the prompt"))
    assert type(found) is expected and found.status == status
    assert "prompt" not in str(found)


@pytest.mark.parametrize(("errors", "exc", "window"), [
    (AnthropicErrors(), _anthropic(400, "prompt is too long: 300000 tokens > 200000 maximum"), (300000, 200000)),
    (OpenAIErrors(), _openai(400, "This model's maximum context length is 8192 tokens. However, your messages "
                                  "resulted in 9000 tokens.", "context_length_exceeded"), (9000, 8192)),
    (GeminiErrors(), _gemini(400, "The input token count (5000) exceeds the maximum number of tokens allowed "
                                  "(1000)."), (5000, 1000)),
], ids=["anthropic", "openai", "gemini"])
def test_each_provider_words_its_overflow(errors: ErrorMap, exc: BaseException, window: tuple[int, int]) -> None:
    found = errors.classify(exc)
    assert isinstance(found, ContextWindowExceeded)
    assert (found.prompt_tokens, found.context_window) == window


def test_provider_codes_and_transport_errors() -> None:
    # OpenAI's exhausted quota comes as a 429: no retry helps.
    quota = OpenAIErrors().classify(_openai(429, "You exceeded your current quota", "insufficient_quota"))
    assert type(quota) is ProviderPermissionDenied and quota.status == 429
    stream = OpenAIErrors().classify(openai.APIError("x", _REQUEST, body={"code": "rate_limit_exceeded"}))
    assert type(stream) is RateLimited and stream.status is None
    assert type(AnthropicErrors().classify(anthropic.APITimeoutError(_REQUEST))) is ProviderTimeout
    assert type(OpenAIErrors().classify(openai.APIConnectionError(request=_REQUEST))) is ProviderUnavailable
    assert type(GeminiErrors().classify(_gemini(404), cached=True)) is CacheNotFound
    assert type(GeminiErrors().classify(_gemini(403, "CachedContent not found"), cached=True)) is CacheNotFound
    assert type(GeminiErrors().classify(_gemini(403, "CachedContent"), cached=False)) is ProviderPermissionDenied
    assert type(AnthropicErrors().classify(ValueError("echo"))) is InvalidRequest
    with pytest.raises(RateLimited):
        with GeminiErrors().mapped():
            raise _gemini(429)
