"""Embed: texts to vectors with a provider's embedding model (see
docs/ARCHITECTURE.md, "Memory"). The provider is found as a model call's
is (the request's, else the routing table's for the model); one without an
embedding API is FAILED_PRECONDITION EMBEDDINGS_NOT_SUPPORTED, and a
request the provider would refuse (no texts, an empty one, more than it
takes at once, bad dimensions) is INVALID_ARGUMENT INVALID_EMBED_REQUEST
before anything is sent. Provider failures map as model calls' do
(``generation.provider_error_status``).

Telemetry is content-free: the span has the provider, the count of texts
and their total bytes, never a text or a vector.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace

from agentctx_common.errors import FailedPrecondition, FieldViolation, InvalidArgument, Unavailable
from agentctx_common.reasons import Reason
from cache_service.domain.generation import provider_error_status
from cache_service.domain.ports import EmbedCall, Embedder, Embeddings, Provider, ProviderError, ProviderTimeout

MAX_DIMENSIONS = 8192
# One text's bound here (the providers' own token limits are tighter).
MAX_TEXT_BYTES = 256 * 1024

_tracer = trace.get_tracer("agentctx.cache")


def embedder(provider: Provider) -> Embedder:
    """The provider's embedding API, or FAILED_PRECONDITION."""
    if not isinstance(provider, Embedder):
        raise FailedPrecondition(
            f"provider {provider.name} has no embedding API: route the embedding model to a Gemini, OpenAI "
            "or local-sim provider", reason=Reason.EMBEDDINGS_NOT_SUPPORTED, metadata={"provider": provider.name},
        )
    return provider


def check_call(call: EmbedCall, max_texts: int) -> None:
    """INVALID_ARGUMENT INVALID_EMBED_REQUEST naming every bad field."""
    v = []
    if not call.model:
        v.append(FieldViolation("model", "is required"))
    if not call.texts:
        v.append(FieldViolation("texts", "must not be empty"))
    elif len(call.texts) > max_texts:
        v.append(FieldViolation("texts", f"at most {max_texts} texts in one call to this provider"))
    for i, text in enumerate(call.texts):
        if not text.strip():
            v.append(FieldViolation(f"texts[{i}]", "must not be empty"))
        elif len(text.encode()) > MAX_TEXT_BYTES:
            v.append(FieldViolation(f"texts[{i}]", f"must be at most {MAX_TEXT_BYTES} bytes"))
    if call.dimensions is not None and not 1 <= call.dimensions <= MAX_DIMENSIONS:
        v.append(FieldViolation("dimensions", f"must be between 0 (the model's own) and {MAX_DIMENSIONS}"))
    if v:
        raise InvalidArgument.fields(v, reason=Reason.INVALID_EMBED_REQUEST)


async def embed(provider: Provider, call: EmbedCall, timeout_s: float) -> Embeddings:
    """The vectors, one per text, or the call's error."""
    api = embedder(provider)
    check_call(call, api.max_embed_texts)
    with _tracer.start_as_current_span("cache.embed", attributes={
        "cache.provider": provider.name, "embed.texts": len(call.texts),
        "embed.text_bytes": sum(len(t.encode()) for t in call.texts),
    }) as span:
        try:
            async with asyncio.timeout(timeout_s):
                result = await api.embed(call)
        except ProviderError as exc:
            raise provider_error_status(exc) from None
        except TimeoutError:
            raise provider_error_status(ProviderTimeout()) from None
        if len(result.vectors) != len(call.texts):
            raise Unavailable("the provider answered a different number of vectors than texts",
                              reason=Reason.PROVIDER_UNAVAILABLE, retry_after=1.0)
        span.set_attribute("embed.dimensions", len(result.vectors[0]) if result.vectors else 0)
        return result
