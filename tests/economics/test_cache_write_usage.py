"""Usage.cache_write_tokens reaches the GenerateResponse: a marked
provider's writes (Anthropic's cache_creation_input_tokens; here the
simulator's) go from the adapter's Usage through the cache service's
GenerateContent and the context service's Generate, call by call, and add
up to what the provider billed."""

from __future__ import annotations

import pathlib

from agentctx_common.certs import init_dev_certs
from bench.economics import ADK_OVERRIDES, RecordingProvider
from bench.economics_shapes import Call, Workload, play
from cache_service.domain.clock import ManualClock


def _anthropic(clock: ManualClock) -> RecordingProvider:
    return RecordingProvider(name="local-anthropic", clock=clock, context_window=1_000_000)


async def test_cache_writes_are_reported_per_call(tmp_path: pathlib.Path) -> None:
    certs = tmp_path / "certs"
    init_dev_certs(certs)
    chat = Workload("chat", tuple(Call("s", f"Step {i}: " + "detail " * 300, 20.0) for i in range(4)), big_head=True)
    played = await play(chat, _anthropic, "local-anthropic", "local-sim-anthropic-1", "agentctx", certs, tmp_path,
                        ADK_OVERRIDES)
    assert played.billed_write_tokens > 0
    assert played.cache_write_tokens == played.billed_write_tokens
    plain = await play(chat, _anthropic, "local-anthropic", "local-sim-anthropic-1", "uncached", certs,
                       tmp_path / "plain", ADK_OVERRIDES)
    assert (plain.cache_write_tokens, plain.billed_write_tokens) == (0, 0)


def _gemini(clock: ManualClock) -> RecordingProvider:
    return RecordingProvider(name="local", clock=clock, context_window=1_000_000)


async def test_named_creates_are_reported_on_the_calls_that_made_them(tmp_path: pathlib.Path) -> None:
    # A Gemini-like create is billed beside the call (the simulator's bill);
    # the call whose lease created or grew the cache reports its tokens.
    certs = tmp_path / "certs"
    init_dev_certs(certs)
    chat = Workload("chat", tuple(Call("s", f"Step {i}: " + "detail " * 300, 20.0) for i in range(5)), big_head=True)
    played = await play(chat, _gemini, "local", "local-sim-1", "agentctx", certs, tmp_path, ADK_OVERRIDES)
    assert played.creates > 0 and played.billed_write_tokens > 0
    assert played.cache_write_tokens == played.billed_write_tokens
