"""Calls that wait for a busy server to take them up are not cancelled.

gRPC cancels a call the application has not taken up within
``grpc.server_max_unrequested_time_in_server`` (30 s by default) with a bare
CANCELLED: no details, no RetryInfo, nothing done. A Python server takes
calls up one at a time on its event loop, so under load (hundreds of large
appends) calls waited that long and 34 of 2,200 appends came back CANCELLED
after 32-39 s. The servers now set that time from ``max_unrequested_time_s``
(an hour by default): a waiting call ends at its own deadline, or is served
or refused with RetryInfo by admission control once taken up.

Here the event loop is blocked for longer than a tiny configured limit while
calls arrive: with the limit they are cancelled, with the default they are
served.
"""

from __future__ import annotations

import time

import grpc

from agentctx_common.server import new_server
from agentctx_common.settings import ServerSettings

BLOCK_S = 2.5  # the event loop stalls this long (longer than the tiny limit)


async def _calls_while_the_loop_is_blocked(**settings: object) -> list[grpc.StatusCode]:
    async def block(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        time.sleep(BLOCK_S)  # noqa: ASYNC251 - the stall under test: the loop cannot take up calls
        return b"blocked"

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    def register(server: grpc.aio.Server) -> None:
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Busy", {
            "Block": grpc.unary_unary_rpc_method_handler(block),
            "Echo": grpc.unary_unary_rpc_method_handler(echo),
        }),))

    server = new_server(
        ServerSettings(dev_plaintext=True, host="127.0.0.1", port=0, **settings),
        service_names=["test.Busy"], register=register, telemetry_name="test",
    )
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            await channel.unary_unary("/test.Busy/Echo")(b"warm", timeout=30)
            blocked = channel.unary_unary("/test.Busy/Block")(b"", timeout=30)
            # The server's loop stalls as soon as Block runs; the client's
            # loop is separate from it only in time, so start the calls at
            # once: they reach gRPC while the server cannot take them up.
            waiting = [channel.unary_unary("/test.Busy/Echo")(b"%d" % i, timeout=30) for i in range(6)]
            codes = []
            for call in [blocked, *waiting]:
                try:
                    await call
                    codes.append(grpc.StatusCode.OK)
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
            return codes
    finally:
        await server.stop(0)


async def test_a_tiny_unrequested_time_cancels_waiting_calls() -> None:
    codes = await _calls_while_the_loop_is_blocked(max_unrequested_time_s=1)
    assert grpc.StatusCode.CANCELLED in codes


async def test_by_default_calls_waiting_for_a_busy_server_are_served() -> None:
    assert ServerSettings.model_fields["max_unrequested_time_s"].default >= 600
    codes = await _calls_while_the_loop_is_blocked()
    assert codes == [grpc.StatusCode.OK] * 7
