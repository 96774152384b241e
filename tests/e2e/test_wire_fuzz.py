"""Raw bytes on the wire, to every method of both services (health and
reflection included) over real TLS channels: random bytes, valid requests
truncated, bit-flipped, with bytes inserted or dropped, and valid requests
followed by garbage. Whatever arrives, the answer is a deliberate status
(INVALID_ARGUMENT MALFORMED_REQUEST for bytes that do not decode), never
UNKNOWN or INTERNAL, nothing is logged at ERROR, and both servers answer
afterwards. test_fuzzed_requests.py fuzzes decodable messages; this file
fuzzes the bytes underneath them.

Seeded and bounded: CASES_PER_METHOD requests per method.
"""

from __future__ import annotations

import logging
import pathlib
import random
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from agentctx.cache.v1 import cache_service_pb2
from agentctx.context.v1 import context_service_pb2
from tests.e2e.test_fuzzed_requests import CACHE_DEFAULTS, VALID, _ensure_sessions, _methods
from tests.support.pair import ServicePair, pair_maker

SEED = 20261202
CASES_PER_METHOD = 14
BAD = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


def _random(rng: random.Random, _valid: bytes) -> bytes:
    return rng.randbytes(rng.choice([1, 2, 7, 33, 200, 2000]))


def _truncated(rng: random.Random, valid: bytes) -> bytes:
    return valid[: rng.randrange(len(valid))] if len(valid) > 1 else b"\x0a"


def _bit_flipped(rng: random.Random, valid: bytes) -> bytes:
    data = bytearray(valid or b"\x00")
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def _spliced(rng: random.Random, valid: bytes) -> bytes:
    """A run of bytes inserted or dropped in the middle: every later tag
    and length is read out of step."""
    at = rng.randrange(len(valid) + 1)
    if rng.random() < 0.5:
        return valid[:at] + rng.randbytes(rng.randint(1, 8)) + valid[at:]
    return valid[:at] + valid[at + rng.randint(1, 8):]


def _then_garbage(rng: random.Random, valid: bytes) -> bytes:
    tails = [rng.randbytes(rng.randint(1, 64)), b"\xff" * 10, b"\x0a\xff\xff\xff\xff\x0f",  # a huge length
             b"\x0a\x05\xff\xfe\xfd\xfc\xfb",  # invalid UTF-8 in field 1
             b"\x07", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"]  # bad wire type, an overlong varint
    return valid + rng.choice(tails)


MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [_random, _truncated, _bit_flipped, _spliced, _then_garbage]


def _valid_bytes() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for module, service in ((context_service_pb2, "ContextService"), (cache_service_pb2, "CacheService")):
        for method, request_type, _ in _methods(module, service):
            out[method] = json_format.ParseDict(VALID[method], request_type()).SerializeToString()
    out["Check"] = health_pb2.HealthCheckRequest(service="agentctx.context.v1.ContextService").SerializeToString()
    out["ServerReflectionInfo"] = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    return out


async def _send(channel: grpc.aio.Channel, path: str, payload: bytes, kind: str) -> grpc.StatusCode:
    """One call with ``payload`` as the request's bytes (no serializer)."""
    try:
        if kind == "unary":
            await channel.unary_unary(path)(payload, timeout=15)
        elif kind == "server-stream":
            async for _ in channel.unary_stream(path)(payload, timeout=15):
                pass
        else:  # a request stream: a valid message, then the fuzzed one
            requests = iter([_valid_bytes()["ServerReflectionInfo"], payload])
            async for _ in channel.stream_stream(path)(requests, timeout=15):
                pass
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


@pytest.fixture
async def pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    async with pair_maker(certs_dir, tmp_path, cache_defaults=CACHE_DEFAULTS) as make:
        yield await make()


async def test_raw_bytes_never_get_unknown_or_internal(pair: ServicePair, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    await _ensure_sessions(pair)
    _ = pair.cache_stub  # opens the channel with the context service's identity
    assert pair._cache_channel is not None
    targets: list[tuple[grpc.aio.Channel, str, str, str]] = []
    for channel, module, service in ((pair.channel, context_service_pb2, "agentctx.context.v1.ContextService"),
                                     (pair._cache_channel, cache_service_pb2, "agentctx.cache.v1.CacheService")):
        for method, _, streaming in _methods(module, service.rsplit(".", 1)[1]):
            targets.append((channel, f"/{service}/{method}", method, "server-stream" if streaming else "unary"))
        targets.append((channel, "/grpc.health.v1.Health/Check", "Check", "unary"))
        targets.append((channel, REFLECTION, "ServerReflectionInfo", "bidi"))

    valid = _valid_bytes()
    rng = random.Random(SEED)
    failures: list[str] = []
    codes: dict[str, int] = {}
    for channel, path, method, kind in targets:
        for i in range(CASES_PER_METHOD):
            mutation = MUTATIONS[i % len(MUTATIONS)]
            payload = mutation(rng, valid[method])
            code = await _send(channel, path, payload, kind)
            codes[code.name] = codes.get(code.name, 0) + 1
            if code in BAD:
                failures.append(f"{path} {mutation.__name__} {payload[:24].hex()}...: {code.name}")
    assert not failures, failures[:5]
    # Most of the bytes do not decode; some mutations still do (and get past decoding).
    assert codes.get("INVALID_ARGUMENT", 0) > len(targets) * CASES_PER_METHOD // 3, codes
    assert len(codes) > 2, codes

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [(r.name, r.getMessage()) for r in errors[:3]]

    for channel in (pair.channel, pair._cache_channel):
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    # And a valid request still works.
    session = await pair.stub.GetSession(context_service_pb2.GetSessionRequest(name=VALID["GetSession"]["name"]))
    assert session.name == VALID["GetSession"]["name"]
