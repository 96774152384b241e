"""The gRPC floor of bench.artifacts: the same bytes streamed over the same
kind of channel with nothing behind it.

``serve`` (run as ``python -m bench.grpc_floor PORT CERTS``, a process of
its own like the context service) is a bare grpc.aio server on TLS with the
context service's key and certificate and its transport options (message
size bound, the fixed 64 KiB stream window without BDP probing). It has two
methods on raw bytes, no protobuf: ``Sink`` reads a client stream and
drops it, ``Source`` streams N MiB of one preallocated block. ``save`` and
``load`` time one artifact-sized transfer in 1 MiB messages each way from
the bench's process (a load joins the messages, as ``load_artifact``
does). What an artifact save or load takes beyond these is the service's
own work: storage, hashing, protobuf, Python.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys
import time
from collections.abc import AsyncIterator

import grpc

from agentctx_common.settings import ServerSettings

MIB = 1024 * 1024
_SERVICE = "agentctx.bench.Floor"


async def serve(port: int, certs: pathlib.Path, max_message_bytes: int) -> None:
    fields = ServerSettings.model_fields
    creds = grpc.ssl_server_credentials(
        [((certs / "context-server.key").read_bytes(), (certs / "context-server.pem").read_bytes())]
    )
    block = os.urandom(MIB)

    async def sink(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        size = 0
        async for message in requests:
            size += len(message)
        return size.to_bytes(8, "big")

    async def source(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> AsyncIterator[bytes]:
        for _ in range(int.from_bytes(request, "big") // MIB):
            yield block

    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # The context service's defaults (agentctx_common.server).
        ("grpc.http2.bdp_probe", 1 if fields["http2_bdp_probe"].default else 0),
        ("grpc.http2.lookahead_bytes", fields["http2_stream_window_bytes"].default),
    ])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(_SERVICE, {
        "Sink": grpc.stream_unary_rpc_method_handler(sink),
        "Source": grpc.unary_stream_rpc_method_handler(source),
    })])
    server.add_secure_port(f"127.0.0.1:{port}", creds)
    await server.start()
    print("serving", flush=True)
    await server.wait_for_termination()


async def save(channel: grpc.aio.Channel, size: int) -> float:
    """Seconds to stream ``size`` bytes to the floor server in 1 MiB messages."""
    block = os.urandom(MIB)

    async def pieces() -> AsyncIterator[bytes]:
        for _ in range(size // MIB):
            yield block

    sink: grpc.aio.StreamUnaryMultiCallable[bytes, bytes] = channel.stream_unary(f"/{_SERVICE}/Sink")
    started = time.perf_counter()
    got = await sink(pieces())
    took = time.perf_counter() - started
    assert int.from_bytes(got, "big") == size
    return took


async def load(channel: grpc.aio.Channel, size: int) -> float:
    """Seconds to receive ``size`` bytes in 1 MiB messages, joined."""
    source: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(f"/{_SERVICE}/Source")
    started = time.perf_counter()
    data = b"".join([m async for m in source(size.to_bytes(8, "big"))])
    took = time.perf_counter() - started
    assert len(data) == size
    return took


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])))
