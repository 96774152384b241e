"""A failed RPC releases what its handler held at once, not at the next
cyclic garbage collection.

An exception keeps every frame it unwound through, and each frame its
locals (the request, the history proto built for the model call). Before
the RPC boundary released them, a failed Generate left a reference cycle
through its exceptions and frames, and the protos it held (upb memory, which
the collector's heuristics do not see) lived until a full collection: a
context service whose model calls kept failing grew by gigabytes
(issue 27, point 1). The test runs with the collector off, so only
reference counting can free what the handler held.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from agentctx_common.errors import Unavailable
from agentctx_common.reasons import Reason
from agentctx_common.status import ErrorInterceptor

pytestmark = pytest.mark.asyncio


class Held:
    """Stands for a large request or model call a handler holds."""


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _fail_deep(held: list[weakref.ref[Held]], depth: int) -> None:
    payload = Held()  # a local of every frame the error unwinds through
    held.append(weakref.ref(payload))
    if depth:
        await _fail_deep(held, depth - 1)
    try:
        raise ConnectionError("transport")
    except ConnectionError:
        raise Unavailable("the cache service is unavailable", reason=Reason.CACHE_SERVICE_UNAVAILABLE) from None


async def _serve(held: list[weakref.ref[Held]]) -> tuple[grpc.aio.Server, int]:
    async def unary(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        await _fail_deep(held, 3)
        return b""

    async def stream(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        yield b"first"
        await _fail_deep(held, 3)

    handlers = grpc.method_handlers_generic_handler("t.Failing", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    })
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    server.add_generic_rpc_handlers((handlers,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


@pytest.mark.parametrize("kind", ["Unary", "Stream"])
async def test_a_failed_rpc_frees_what_its_handler_held_without_a_collection(no_gc: None, kind: str) -> None:
    held: list[weakref.ref[Held]] = []
    server, port = await _serve(held)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    if kind == "Unary":
                        await channel.unary_unary("/t.Failing/Unary")(b"", timeout=10)
                    else:
                        async for _item in channel.unary_stream("/t.Failing/Stream")(b"", timeout=10):
                            pass
                assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(None)
    assert len(held) == 12
    assert [ref() is None for ref in held] == [True] * 12
