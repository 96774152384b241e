"""Graceful shutdown: health turns NOT_SERVING before the drain, in-flight
RPCs finish within the grace period, and resources close in reverse order."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx_common.server import new_server
from agentctx_common.settings import ServerSettings


async def test_stop_drains_in_flight_calls_and_closes_resources_in_reverse() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        started.set()
        await release.wait()
        return b"done"

    def register(server: grpc.aio.Server) -> None:
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "test.Slow", {"Call": grpc.unary_unary_rpc_method_handler(slow)}),))

    settings = ServerSettings(dev_plaintext=True, host="127.0.0.1", port=0)
    server = new_server(settings, service_names=["test.Slow"], register=register, telemetry_name="test")
    closed: list[str] = []

    async def close_db() -> None:
        closed.append("db")

    async def close_workers() -> None:
        closed.append("workers")

    server.closers += [close_db, close_workers]
    await server.start()
    async with grpc.aio.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        watch = health.Watch(health_pb2.HealthCheckRequest(service="test.Slow"))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        call = channel.unary_unary("/test.Slow/Call")(b"", timeout=10)
        await started.wait()
        stopping = asyncio.create_task(server.stop(grace=5))
        # Watchers learn NOT_SERVING while the in-flight call still drains.
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert not call.done()
        watch.cancel()  # an open watch would hold the drain for the whole grace period
        release.set()
        assert await call == b"done"
        await stopping
    assert closed == ["workers", "db"]
