"""Usage.cache_write_tokens reaches the GenerateResponse: a marked
provider's writes (Anthropic's cache_creation_input_tokens; here the
simulator's) go from the adapter's Usage through the cache service's
GenerateContent and the context service's Generate, call by call, and add
up to what the provider billed; so do a named provider's creates, on the
calls that made them."""

from __future__ import annotations

import pathlib

import pytest

from agentctx_common.certs import init_dev_certs
from bench.economics import ADK_OVERRIDES, RecordingProvider
from bench.economics_shapes import Call, Workload, play
from cache_service.domain.clock import ManualClock


@pytest.mark.parametrize(("provider", "model"), [("local-anthropic", "local-sim-anthropic-1"),
                                                  ("local", "local-sim-1")])
async def test_cache_writes_are_reported_per_call(tmp_path: pathlib.Path, provider: str, model: str) -> None:
    # Marked: what each call wrote. Named (Gemini-like): a create is billed
    # beside the call, and the call whose lease created or grew the cache
    # reports its tokens.
    certs = tmp_path / "certs"
    init_dev_certs(certs)

    def simulator(clock: ManualClock) -> RecordingProvider:
        return RecordingProvider(name=provider, clock=clock, context_window=1_000_000)

    chat = Workload("chat", tuple(Call("s", f"Step {i}: " + "detail " * 300, 20.0) for i in range(5)), big_head=True)
    played = await play(chat, simulator, provider, model, "agentctx", certs, tmp_path, ADK_OVERRIDES)
    assert played.billed_write_tokens > 0
    assert played.cache_write_tokens == played.billed_write_tokens
    plain = await play(chat, simulator, provider, model, "uncached", certs, tmp_path / "plain", ADK_OVERRIDES)
    assert (plain.cache_write_tokens, plain.billed_write_tokens) == (0, 0)
