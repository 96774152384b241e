"""Requests whose bytes do not decode, on real servers of both services:
INVALID_ARGUMENT with reason MALFORMED_REQUEST, one WARNING line that holds
the size and never the bytes, and the server answers the next call."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.cache.v1 import cache_service_pb2
from agentctx.context.v1 import context_service_pb2
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from tests.support.pair import ServicePair, pair_maker

MARKER = b"SECRETCONTENT"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _deep_struct(depth: int) -> bytes:
    """A google.protobuf.Struct nested ``depth`` times ({"a": {"a": ...}})."""
    struct = b""
    for _ in range(depth):
        value = _field(5, struct)  # Value.struct_value
        struct = _field(1, _field(1, b"a") + _field(2, value))  # Struct.fields entry
    return struct


def _number(message: type[Message], path: str) -> list[int]:
    numbers, descriptor = [], message.DESCRIPTOR
    for name in path.split("."):
        field = descriptor.fields_by_name[name]
        numbers.append(field.number)
        descriptor = field.message_type
    return numbers


def _nested(numbers: list[int], payload: bytes) -> bytes:
    for number in reversed(numbers):
        payload = _field(number, payload)
    return payload


def _cases(message: type[Message], string_field: str, struct_field: str) -> dict[str, bytes]:
    return {
        "garbage": b"\xff\xff\xff\xff" + MARKER,
        "invalid utf-8 in a string": _nested(_number(message, string_field), MARKER + b"\xff\xfe"),
        "struct nested too deep": _nested(_number(message, struct_field), _deep_struct(200)),
    }


CONTEXT = "/agentctx.context.v1.ContextService/"
CACHE = "/agentctx.cache.v1.CacheService/"


@pytest.fixture
async def pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    async with pair_maker(certs_dir, tmp_path) as make:
        yield await make()


async def _raw(channel: grpc.aio.Channel, path: str, payload: bytes, streaming: bool) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if streaming:
            async for _ in channel.unary_stream(path)(payload, timeout=10):
                pass
        else:
            await channel.unary_unary(path)(payload, timeout=10)
    return caught.value


def _check(err: grpc.aio.AioRpcError, size: int) -> None:
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), err.details())
    rebuilt = error_from_rpc(err)
    assert rebuilt.reason is Reason.MALFORMED_REQUEST
    assert rebuilt.metadata == {"request_bytes": str(size)}
    assert MARKER.decode() not in (err.details() or "")


@pytest.mark.parametrize("case", ["garbage", "invalid utf-8 in a string", "struct nested too deep"])
async def test_undecodable_requests_are_invalid_argument(
    pair: ServicePair, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    _ = pair.cache_stub
    assert pair._cache_channel is not None
    calls = [
        (pair.channel, CONTEXT + "CreateSession", False,
         _cases(context_service_pb2.CreateSessionRequest, "parent", "session.state")[case]),
        (pair.channel, CONTEXT + "StreamGenerate", True,
         _cases(context_service_pb2.StreamGenerateRequest, "turn.session", "turn.input.custom_metadata")[case]),
        (pair.channel, CONTEXT + "BuildContext", False,
         _cases(context_service_pb2.BuildContextRequest, "session", "tools.function_declarations.parameters")[case]),
        (pair._cache_channel, CACHE + "GetScopeStatus", False,
         _cases(cache_service_pb2.GetScopeStatusRequest, "scope.app", "scope.policy")[case]),
        (pair._cache_channel, CACHE + "StreamGenerateContent", True,
         _cases(cache_service_pb2.StreamGenerateContentRequest, "call.scope.app", "call.scope.policy")[case]),
    ]
    for channel, path, streaming, payload in calls:
        _check(await _raw(channel, path, payload, streaming), len(payload))

    warnings = [r for r in caplog.records if r.getMessage() == "undecodable request"]
    assert [r.levelno for r in warnings] == [logging.WARNING] * len(calls)
    assert {r.__dict__["rpc"] for r in warnings} == {path for _, path, _, _ in calls}
    for record in caplog.records:
        assert record.levelno < logging.ERROR, record.getMessage()
        assert MARKER.decode() not in str(record.__dict__)

    for channel in (pair.channel, pair._cache_channel):
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_an_undecodable_message_in_a_request_stream_is_invalid_argument(pair: ServicePair) -> None:
    """Reflection reads a request stream; a bad message in it ends the call
    with MALFORMED_REQUEST, not INTERNAL."""
    from grpc_reflection.v1alpha import reflection_pb2

    good = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    bad = b"\xff\xff\xff" + MARKER
    call = pair.channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")(
        iter([good, bad]), timeout=10
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in call:
            pass
    _check(caught.value, len(bad))
