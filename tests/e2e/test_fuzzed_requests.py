"""Malformed requests on every RPC of both services: whatever the field
values, the answer is a deliberate status (INVALID_ARGUMENT, NOT_FOUND, ...)
or a success, never INTERNAL or UNKNOWN, and both servers stay healthy.

Two kinds of requests, generated from the message descriptors with a
seeded RNG: random messages (random scalars: empty, huge, negative, NaN,
odd unicode; unknown enum numbers; nested messages and repeated fields;
name-like fields often a well-formed resource name), and valid requests
with one to three fields mutated or cleared, which get past the first check
into the deeper validation, the store, compaction and the model call.
"""

from __future__ import annotations

import asyncio
import copy
import math
import pathlib
import random
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as d
from google.protobuf import json_format, struct_pb2
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.cache.v1 import cache_service_pb2
from agentctx.context.v1 import context_service_pb2
from tests.sessions.helpers import migrate
from tests.support.pair import ServicePair, pair_maker

SEED = 20261201
PER_RPC = 60
SESSION = "apps/fuzz/users/u1/sessions/s1"
NAMES = [SESSION, "apps/fuzz/users/u1", "apps/fuzz/users/-", "apps/-/users/-", f"{SESSION}/events/e1",
         "apps/other/users/u1/sessions/s1", "apps//users/u1/sessions/s1", "apps/fuzz/users/u1/sessions/" + "x" * 300]
STRINGS = ["", " ", "a", "x" * 5000, "\u0000", "\udcff".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
           "🦀" * 50, "../../etc/passwd", "local-sim-1", "{\"a\": 1}", "apps/fuzz", "user", "model", "-"]
INTS = [0, 1, -1, 2**31 - 1, -(2**31), 2**62, -(2**62), 7, 1000]
FLOATS = [0.0, -1.0, 1e300, -1e-300, math.inf, -math.inf, math.nan, 0.5, 4.0]
# Fields whose value steers a request to an existing resource.
# Small enough that a short conversation is worth caching.
CACHE_DEFAULTS = {"local_min_cache_tokens": 64, "min_prefix_tokens": 64}
NAME_FIELDS = {"name", "parent", "session", "prefix_session"}


def _scalar(field: d.FieldDescriptor, rng: random.Random) -> Any:
    t = field.type
    if t == d.FieldDescriptor.TYPE_STRING:
        if field.name in NAME_FIELDS and rng.random() < 0.7:
            return rng.choice(NAMES)
        return rng.choice(STRINGS)
    if t == d.FieldDescriptor.TYPE_BYTES:
        return rng.choice([b"", b"\x00\xff", rng.randbytes(64), b"x" * 100_000])
    if t == d.FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t in (d.FieldDescriptor.TYPE_DOUBLE, d.FieldDescriptor.TYPE_FLOAT):
        value = rng.choice(FLOATS)
        return value if t == d.FieldDescriptor.TYPE_DOUBLE or math.isnan(value) or abs(value) < 3e38 else 1.0
    if t == d.FieldDescriptor.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values]
        return rng.choice([*numbers, 999, -5])
    value = rng.choice(INTS)
    if t in (d.FieldDescriptor.TYPE_UINT32, d.FieldDescriptor.TYPE_UINT64, d.FieldDescriptor.TYPE_FIXED32,
             d.FieldDescriptor.TYPE_FIXED64):
        value = abs(value)
    if t in (d.FieldDescriptor.TYPE_INT32, d.FieldDescriptor.TYPE_SINT32, d.FieldDescriptor.TYPE_SFIXED32,
             d.FieldDescriptor.TYPE_UINT32, d.FieldDescriptor.TYPE_FIXED32):
        value = max(min(value, 2**31 - 1), -(2**31)) if value >= -(2**31) else -(2**31)
        if t in (d.FieldDescriptor.TYPE_UINT32, d.FieldDescriptor.TYPE_FIXED32):
            value = abs(value)
    return value


def _json_value(rng: random.Random, depth: int) -> Any:
    choice = rng.randrange(6 if depth < 3 else 4)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice(STRINGS)
    if choice == 2:
        return rng.choice([0, -1, 1e300, 3.5])
    if choice == 3:
        return rng.random() < 0.5
    if choice == 4:
        return [_json_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["api_key", "token", "a", "", "x" * 200]): _json_value(rng, depth + 1) for _ in range(rng.randrange(3))}


def fill(message: Message, rng: random.Random, depth: int = 0) -> Message:
    """Sets a random subset of ``message``'s fields to random values."""
    if isinstance(message, struct_pb2.Struct):
        message.update({"k": _json_value(rng, depth), "api_key": "secret"} if rng.random() < 0.5 else {})
        return message
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 0.45:
            continue
        repeated = field.is_repeated
        count = rng.randrange(4) if repeated else 1
        if field.type == d.FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                target = getattr(message, field.name)
                value_field = field.message_type.fields_by_name["value"]
                for _ in range(count):
                    key = rng.choice(STRINGS)
                    if value_field.type == d.FieldDescriptor.TYPE_MESSAGE:
                        if depth < 4:
                            fill(target[key], rng, depth + 1)
                    else:
                        target[key] = _scalar(value_field, rng)
                continue
            if depth >= 4:
                continue
            for _ in range(count):
                child = getattr(message, field.name).add() if repeated else getattr(message, field.name)
                fill(child, rng, depth + 1)
                if not repeated:
                    child.SetInParent()
        else:
            for _ in range(count):
                value = _scalar(field, rng)
                try:
                    if repeated:
                        getattr(message, field.name).append(value)
                    else:
                        setattr(message, field.name, value)
                except (ValueError, TypeError):
                    pass  # an out-of-range value this field cannot hold
    return message


TEXT = {"role": "user", "parts": [{"text": "Find a flight to Paris, api_key=sk-1"}]}
CALL = {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "search", "args": {"to": "CDG", "token": "t"}}}]}
ANSWER = {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "search", "response": {"ok": True}}}]}
TOOLS = [{"function_declarations": [{"name": "search", "description": "d", "parameters": {"type": "object"}}]}]
CONFIG = {"model": "local-sim-1", "selection": {"max_tokens": "4000", "overflow": "OVERFLOW_MODE_TRUNCATE"},
          "compaction": {"enabled": True, "context_window": "32768", "reserve_tokens": "4096", "keep_recent_tokens": "200"},
          "cache": {"enabled": True, "ttl": "60s"}}
TURN = {"session": SESSION, "input": [{"author": "user", "content": TEXT}], "system_instruction": {"parts": [{"text": "be brief"}]},
        "tools": TOOLS, "tool_config": {"mode": "FUNCTION_CALLING_MODE_AUTO"}, "generation_config": {"temperature": 0.5},
        "policy": {"max_request_tokens": "100000"}}
SCOPE = {"app": "fuzz", "user": "u1", "model": "local-sim-1", "policy": {"p": 1}}
HISTORY = [TEXT, CALL, ANSWER] * 30
MODEL_REQUEST = {"model": "local-sim-1", "contents": [*HISTORY, TEXT], "tools": TOOLS,
                 "system_instruction": {"parts": [{"text": "be brief"}]}, "generation_config": {"max_output_tokens": 50}}
# A valid request of every RPC, the starting point of the mutations.
VALID: dict[str, dict[str, Any]] = {
    "CreateSession": {"parent": "apps/fuzz/users/u1", "session": {"config": CONFIG, "state": {"k": "v"}}},
    "GetSession": {"name": SESSION},
    "ListSessions": {"parent": "apps/fuzz/users/-", "page_size": 3},
    "UpdateSession": {"session": {"name": SESSION, "state": {"a": [1, "x"]}, "config": CONFIG},
                      "update_mask": "state,config"},
    "DeleteSession": {"name": "apps/fuzz/users/u1/sessions/doomed"},
    "AppendEvent": {"parent": SESSION, "event": {"author": "agent", "content": CALL, "invocation_id": "i1"},
                    "state_delta": {"session": {"k": 1}, "user": {"u": "x"}, "app": {"a": [1]}}},
    "BatchAppendEvents": {"parent": SESSION, "events": [
        {"id": "fz-call", "author": "agent", "content": CALL, "invocation_id": "i2"},
        {"author": "user", "content": TEXT}]},
    "ListEvents": {"parent": SESSION, "page_size": 5, "include_compactions": True, "most_recent": 3,
                   "after_time": "2020-01-01T00:00:00Z"},
    "GetSharedState": {"parent": "apps/fuzz/users/u1"},
    "BuildContext": {k: v for k, v in TURN.items() if k != "input"} | {"input": [TEXT], "memory": [TEXT]},
    "CompactSession": {"session": SESSION, "instructions": "keep ids", "policy": {"keep_recent_tokens": "100"}},
    "Generate": TURN,
    "StreamGenerate": {"turn": TURN},
    "GetContextLifecycle": {"session": SESSION, "model": "local-sim-1"},
    "MintToolTokens": {"session": SESSION, "event_id": "fz-call"},
    "InvalidateContextCache": {"session": SESSION, "model": "local-sim-1", "confirmation": {
        "app": "fuzz", "user": "u1", "session": "s1", "model": "local-sim-1", "scope_fingerprint": "0" * 64}},
    "AcquireLease": {"scope": SCOPE, "prefix": {"history": HISTORY, "tools": TOOLS}, "ttl": "30s"},
    "ResolveLease": {"lease": "x"},
    "ReleaseLease": {"lease": "x"},
    "GenerateContent": {"scope": SCOPE, "request": MODEL_REQUEST},
    "StreamGenerateContent": {"call": {"scope": SCOPE, "request": MODEL_REQUEST}},
    "InvalidateScope": {"scope": SCOPE},
    "GetScopeStatus": {"scope": SCOPE},
    "Embed": {"provider": "local", "model": "local-sim-embed", "texts": ["a window seat", "tea"]},
}


def _slots(message: Message, depth: int = 0) -> list[tuple[Message, d.FieldDescriptor]]:
    """Every (message, field) a mutation may change: all fields of the
    request and of the messages set inside it."""
    out = [(message, f) for f in message.DESCRIPTOR.fields]
    if depth >= 4 or isinstance(message, struct_pb2.Struct):
        return out
    for field, value in message.ListFields():
        if field.type != d.FieldDescriptor.TYPE_MESSAGE or field.message_type.GetOptions().map_entry:
            continue
        for child in (value if field.is_repeated else [value]):
            out += _slots(child, depth + 1)
    return out


def mutate(message: Message, rng: random.Random) -> Message:
    """One to three fields of a valid ``message`` set to random values or cleared."""
    for _ in range(rng.randint(1, 3)):
        target, field = rng.choice(_slots(message))
        target.ClearField(field.name)
        if rng.random() < 0.25:
            continue
        if field.type == d.FieldDescriptor.TYPE_MESSAGE:
            scratch = type(target)()
            fill(scratch, rng)
            if scratch.HasField(field.name) if not field.is_repeated else len(getattr(scratch, field.name)):
                getattr(target, field.name).MergeFrom(getattr(scratch, field.name))
        else:
            value = _scalar(field, rng)
            try:
                if field.is_repeated:
                    getattr(target, field.name).append(value)
                else:
                    setattr(target, field.name, value)
            except (ValueError, TypeError):
                pass
    return message


def _methods(module: Any, service_name: str) -> list[tuple[str, type[Message], bool]]:
    service = module.DESCRIPTOR.services_by_name[service_name]
    from google.protobuf import symbol_database

    db = symbol_database.Default()
    return [(m.name, db.GetSymbol(m.input_type.full_name), m.server_streaming) for m in service.methods]


BAD = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)


async def _call(channel: grpc.aio.Channel, service: str, method: str, request: Message, streaming: bool,
                response_type: Any = None) -> grpc.StatusCode:
    path = f"/{service}/{method}"
    kwargs = dict(request_serializer=lambda m: m.SerializeToString(), response_deserializer=lambda b: b)
    try:
        if streaming:
            async for _ in channel.unary_stream(path, **kwargs)(request, timeout=20):
                pass
        else:
            await channel.unary_unary(path, **kwargs)(request, timeout=20)
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


async def _ensure_sessions(pair: ServicePair) -> None:
    """The sessions the valid requests name, recreated when a call deleted them."""
    for session_id in ("s1", "doomed"):
        request = json_format.ParseDict(VALID["CreateSession"], context_service_pb2.CreateSessionRequest())
        request.session_id = session_id
        try:
            await pair.stub.CreateSession(request)
        except grpc.aio.AioRpcError as err:
            assert err.code() == grpc.StatusCode.ALREADY_EXISTS, err


async def _scope_fingerprint(pair: ServicePair) -> str:
    lifecycle = await pair.stub.GetContextLifecycle(
        context_service_pb2.GetContextLifecycleRequest(session=SESSION, model="local-sim-1"))
    return lifecycle.scope_fingerprint


@pytest.fixture
async def fuzz_pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    async with pair_maker(certs_dir, tmp_path, cache_defaults=CACHE_DEFAULTS) as make:
        yield await make()


async def _fuzz(pair: ServicePair, channel: grpc.aio.Channel, module: Any, service: str,
                valid: dict[str, dict[str, Any]], rng: random.Random) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for method, request_type, streaming in _methods(module, service.rsplit(".", 1)[1]):
        for i in range(PER_RPC):
            await _ensure_sessions(pair)
            if method == "InvalidateContextCache":  # the confirmation must name the current scope
                valid[method]["confirmation"]["scope_fingerprint"] = await _scope_fingerprint(pair)
            if i % 2:
                request = fill(request_type(), rng)
            else:
                request = mutate(json_format.ParseDict(valid[method], request_type()), rng)
            code = await _call(channel, service, method, request, streaming)
            seen.setdefault(method, set()).add(code.name)
            assert code not in BAD, f"{method} answered {code.name} to request #{i}: {request}"
    return seen


async def test_fuzzed_requests_never_get_internal(fuzz_pair: ServicePair) -> None:
    rng = random.Random(SEED)
    valid = copy.deepcopy(VALID)
    seen = await _fuzz(fuzz_pair, fuzz_pair.channel, context_service_pb2, "agentctx.context.v1.ContextService", valid, rng)
    # The mutations reach past the first check: nearly every RPC succeeds
    # sometimes (a mutation may spoil every try of an RPC with few fields).
    never_ok = {m: sorted(c) for m, c in seen.items() if "OK" not in c}
    assert len(never_ok) <= 2, never_ok
    assert len(seen) == len(context_service_pb2.DESCRIPTOR.services_by_name["ContextService"].methods)

    _ = fuzz_pair.cache_stub  # opens the channel with the context service's identity
    assert fuzz_pair._cache_channel is not None
    seen = await _fuzz(fuzz_pair, fuzz_pair._cache_channel, cache_service_pb2, "agentctx.cache.v1.CacheService", valid, rng)
    never_ok = {m: sorted(c) for m, c in seen.items() if "OK" not in c}
    assert len(never_ok) <= 2, never_ok

    for channel in (fuzz_pair.channel, fuzz_pair._cache_channel):
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """None: the embedded SQLite file. (A sync fixture: the PostgreSQL
    fixtures run their own event loop.)"""
    return request.getfixturevalue("postgres_url") if backend == "postgres" else None


@pytest.fixture
async def fuzz_pair_on_each_backend(database_url: str | None, certs_dir: pathlib.Path,
                                    tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    context: dict[str, Any] = {}
    if database_url is not None:
        await migrate(database_url)
        context["database_url"] = database_url
    async with pair_maker(certs_dir, tmp_path, cache_defaults=CACHE_DEFAULTS) as make:
        yield await make(context=context)


async def test_concurrent_mixed_requests_never_get_internal(fuzz_pair_on_each_backend: ServicePair) -> None:
    """Several clients at once, each sending valid, mutated and random
    requests to random RPCs of both services (appends racing compactions,
    deletes racing turns, invalidations racing leases)."""
    fuzz_pair = fuzz_pair_on_each_backend
    await _ensure_sessions(fuzz_pair)
    _ = fuzz_pair.cache_stub  # opens the channel with the context service's identity
    assert fuzz_pair._cache_channel is not None
    methods = [(m, t, s, fuzz_pair.channel, "agentctx.context.v1.ContextService")
               for m, t, s in _methods(context_service_pb2, "ContextService")]
    methods += [(m, t, s, fuzz_pair._cache_channel, "agentctx.cache.v1.CacheService")
                for m, t, s in _methods(cache_service_pb2, "CacheService")]
    failures: list[str] = []
    codes: set[str] = set()

    async def client(n: int) -> None:
        rng = random.Random(SEED + n)
        valid = copy.deepcopy(VALID)
        for _ in range(40):
            method, request_type, streaming, channel, service = rng.choice(methods)
            roll = rng.random()
            if roll < 0.6:
                request = json_format.ParseDict(valid[method], request_type())
            elif roll < 0.85:
                request = mutate(json_format.ParseDict(valid[method], request_type()), rng)
            else:
                request = fill(request_type(), rng)
            code = await _call(channel, service, method, request, streaming)
            codes.add(code.name)
            if code in BAD:
                failures.append(f"{method} answered {code.name} to {request}")
            if rng.random() < 0.1:
                await _ensure_sessions(fuzz_pair)

    await asyncio.gather(*(client(n) for n in range(6)))
    assert not failures, failures[:3]
    assert "OK" in codes
    for channel in (fuzz_pair.channel, fuzz_pair._cache_channel):
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
