"""In-test gRPC servers the compaction area talks to: a user's
CompactorService with scriptable misbehaviour, and a CacheService that
implements GenerateContent only (until the real cache service lands, and
for scripting its answers)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from agentctx.cache.v1 import cache_service_pb2, cache_service_pb2_grpc
from agentctx.compactor.v1 import compactor_service_pb2
from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common.tls import server_credentials

_COMPACT = "/agentctx.compactor.v1.CompactorService/Compact"

Behavior = Callable[[compactor_service_pb2.CompactRequest, grpc.aio.ServicerContext], Awaitable[bytes]]


async def answer(summary: str, prompt_tokens: int = 0) -> bytes:
    response = compactor_service_pb2.CompactResponse(summary=summary)
    if prompt_tokens:
        response.usage.prompt_tokens = prompt_tokens
        response.usage.output_tokens = 7
    return response.SerializeToString()


@dataclass
class RemoteCompactorServer:
    """``behavior`` decides each answer; raw bytes, so a test can send what
    is not a CompactResponse at all."""

    server: grpc.aio.Server
    port: int
    requests: list[compactor_service_pb2.CompactRequest] = field(default_factory=list)
    behavior: Behavior | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        await self.server.stop(None)


async def start_remote_compactor() -> RemoteCompactorServer:
    server = grpc.aio.server()
    holder: dict[str, RemoteCompactorServer] = {}

    async def compact(request: compactor_service_pb2.CompactRequest, context: grpc.aio.ServicerContext) -> bytes:
        me = holder["me"]
        me.requests.append(request)
        try:
            if me.behavior is None:
                return await answer(f"summary of {len(request.events)} events")
            return await me.behavior(request, context)
        except asyncio.CancelledError:
            me.cancelled.set()
            raise

    handler = grpc.method_handlers_generic_handler(
        "agentctx.compactor.v1.CompactorService",
        {
            "Compact": grpc.unary_unary_rpc_method_handler(
                compact,
                request_deserializer=compactor_service_pb2.CompactRequest.FromString,
                response_serializer=None,  # behaviours hand back raw bytes
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    me = RemoteCompactorServer(server, port)
    holder["me"] = me
    return me


class ScriptedCache(cache_service_pb2_grpc.CacheServiceServicer):
    """GenerateContent answering with ``reply`` (text) or raising ``error``
    (a grpc status code and message)."""

    def __init__(self) -> None:
        self.requests: list[cache_service_pb2.GenerateContentRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.time_remaining: list[float | None] = []
        self.reply: str = "## Goal\n- summarized"
        self.error: tuple[grpc.StatusCode, str] | None = None
        self.delay_s: float = 0.0

    async def GenerateContent(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.requests.append(request)
        self.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})
        self.time_remaining.append(context.time_remaining())
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            await context.abort(*self.error)
        return cache_service_pb2.GenerateContentResponse(
            response=generation_pb2.ModelResponse(
                content=content_pb2.Content(role="model", parts=[content_pb2.Part(text=self.reply)] if self.reply else []),
                finish_reason=generation_pb2.FINISH_REASON_STOP,
                usage=generation_pb2.Usage(prompt_tokens=1234, output_tokens=56, total_tokens=1290),
            )
        )


async def start_scripted_cache(certs: pathlib.Path) -> tuple[grpc.aio.Server, int, ScriptedCache]:
    """On 127.0.0.1:0 with the cache service's dev certificate, requiring a
    client certificate (mTLS, as the real one)."""
    server = grpc.aio.server()
    servicer = ScriptedCache()
    cache_service_pb2_grpc.add_CacheServiceServicer_to_server(servicer, server)
    creds = server_credentials(certs / "cache-server.pem", certs / "cache-server.key", certs / "ca.pem", True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    await server.start()
    return server, port, servicer
