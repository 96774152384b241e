"""One documented nesting limit for JSON values (hardening: tool args nested
about 31 levels deep were accepted by AppendEvent, and every later
StreamGenerate failed, because the request to the cache service is one
level deeper and the cache service's decoder refused it; its parser text
reached the agent as UNKNOWN).

- max_json_depth is checked wherever contents come in, with a field
  violation naming the field;
- every internal message path carries an event at the limit, at the
  default and at the highest value the setting allows;
- bytes a service cannot decode are INVALID_ARGUMENT MALFORMED_REQUEST,
  and a model request the cache service cannot decode is
  FAILED_PRECONDITION for the agent, never INTERNAL or UNKNOWN.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pydantic
import pytest
from google.protobuf import json_format, struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.cache.v1 import cache_service_pb2
from agentctx.compactor.v1 import compactor_service_pb2
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.status import error_from_rpc
from context_service.domain.event_validation import content_violations, event_violations, state_violations
from context_service.domain.json_depth import DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH_CEILING, exceeds_depth
from context_service.domain.limits import Limits
from context_service.domain.model import Content, Event, FunctionCall, FunctionResponse, Part, SessionKey
from context_service.storage.sql_store import open_store
from tests.compaction.servers import RemoteCompactorServer, answer, start_remote_compactor
from tests.support.pair import ServicePair
from tests.support.servers import context_settings

NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
MODEL = "local-sim-1"


def objects(depth: int) -> Any:
    """An object nested ``depth`` levels (the costliest shape in protobuf)."""
    value: Any = "leaf"
    for i in range(depth):
        value = {f"k{i}": value, "n": i}
    return value


def arrays(depth: int) -> Any:
    """An object holding arrays, ``depth`` levels in all."""
    value: Any = ["leaf", 1]
    for _ in range(depth - 2):
        value = [value, True]
    return {"items": value}


# --- the rule, pure ----------------------------------------------------------------


def test_depth_counts_objects_and_arrays() -> None:
    assert not exceeds_depth("x", 0)
    assert exceeds_depth({}, 0) and not exceeds_depth({}, 1)
    assert not exceeds_depth({"a": [1, {"b": None}]}, 3) and exceeds_depth({"a": [1, {"b": None}]}, 2)
    for depth in (1, 5, 20, 28):
        for shape in (objects, arrays):
            value = shape(depth) if shape is objects or depth >= 2 else {}
            assert not exceeds_depth(value, depth) and exceeds_depth(value, depth - 1)


def test_every_json_field_is_checked_and_named() -> None:
    limits = Limits(max_json_depth=4)
    deep, ok = objects(5), objects(4)
    call = Content("model", (Part(function_call=FunctionCall("c1", "f", ok)), Part(function_call=FunctionCall("c2", "f", deep))))
    assert [v.field for v in content_violations(call, limits, "memory[3]")] == ["memory[3].parts[1].function_call.args"]
    result = Content("user", (Part(function_response=FunctionResponse("c1", "f", deep)),))
    event = Event(id="e1", author="user", content=result, custom_metadata=deep)
    fields = [v.field for v in event_violations(event, limits, size_bytes=10, now=NOW)]
    assert fields == ["event.content.parts[0].function_response.response", "event.custom_metadata"]
    assert [v.field for v in state_violations(deep, 10, limits)] == ["session.state"]
    assert state_violations(ok, 10, limits) == []


def test_the_setting_is_bounded_by_what_the_message_paths_carry(certs_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert context_settings(certs_dir, tmp_path).max_json_depth == DEFAULT_MAX_JSON_DEPTH
    with pytest.raises(pydantic.ValidationError):
        context_settings(certs_dir, tmp_path, max_json_depth=MAX_JSON_DEPTH_CEILING + 1)


# --- over gRPC ---------------------------------------------------------------------


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def _call(call_id: str, args: dict[str, Any]) -> content_pb2.Content:
    c = content_pb2.Content(role="model")
    fc = c.parts.add().function_call
    fc.id, fc.name = call_id, "lookup"
    fc.args.update(args)
    return c


def _result(call_id: str, response: dict[str, Any]) -> content_pb2.Content:
    c = content_pb2.Content(role="user")
    fr = c.parts.add().function_response
    fr.id, fr.name = call_id, "lookup"
    fr.response.update(response)
    return c


def _text(role: str, text: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=text)])


def _event(content: content_pb2.Content, event_id: str = "", metadata: dict[str, Any] | None = None) -> event_pb2.Event:
    event = event_pb2.Event(id=event_id, author="user" if content.role == "user" else "agent")
    event.content.CopyFrom(content)
    if metadata is not None:
        event.custom_metadata.update(metadata)
    return event


async def _violations(call: Any) -> list[str]:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        result = await call if not hasattr(call, "__aiter__") else [x async for x in call]
        del result
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value.details()
    return [v.field for v in error_from_rpc(exc.value).field_violations]


async def _session(stub: Any, compaction: policy_pb2.CompactionPolicy | None = None) -> str:
    config = policy_pb2.ContextConfig(model=MODEL)
    if compaction is not None:
        config.compaction.CopyFrom(compaction)
    created = await stub.CreateSession(pb.CreateSessionRequest(
        parent="apps/app/users/u1", session_id=uuid.uuid4().hex, session=session_pb2.Session(config=config)))
    return created.name


async def _stream(stub: Any, turn: pb.GenerateRequest) -> pb.GenerateResponse:
    result = None
    async for item in stub.StreamGenerate(pb.StreamGenerateRequest(turn=turn)):
        if item.HasField("result"):
            result = item.result
    assert result is not None
    return result


@pytest.fixture
async def remote() -> Any:
    server = await start_remote_compactor()
    yield server
    await server.stop()


@pytest.fixture(params=[DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH_CEILING])
async def limited(request: pytest.FixtureRequest, pair_factory: Callable[..., Any]) -> tuple[ServicePair, int]:
    depth = request.param
    pair = await pair_factory(context={"max_json_depth": depth, "remote_compactor_targets": ["*"]})
    return pair, depth


async def test_every_entry_point_refuses_one_level_more(limited: tuple[ServicePair, int]) -> None:
    pair, depth = limited
    stub, too_deep, ok = pair.stub, objects(depth + 1), objects(depth)
    session = await _session(stub)
    fields = await _violations(stub.AppendEvent(pb.AppendEventRequest(parent=session, event=_event(_call("c1", too_deep)))))
    assert fields == ["event.content.parts[0].function_call.args"]
    fields = await _violations(stub.AppendEvent(pb.AppendEventRequest(
        parent=session, event=_event(_text("user", "hi"), metadata=arrays(depth + 1)))))
    assert fields == ["event.custom_metadata"]
    build = pb.BuildContextRequest(session=session, input=[_result("c1", too_deep)], memory=[_text("user", "m"), _call("c2", too_deep)])
    assert await _violations(stub.BuildContext(build)) == [
        "input[0].parts[0].function_response.response", "memory[1].parts[0].function_call.args"]
    turn = pb.GenerateRequest(session=session, model=MODEL, input=[_event(_result("c1", arrays(depth + 1)), "in1")])
    assert await _violations(stub.Generate(turn)) == ["input[0].content.parts[0].function_response.response"]
    assert await _violations(stub.StreamGenerate(pb.StreamGenerateRequest(turn=turn))) == [
        "turn.input[0].content.parts[0].function_response.response"]
    turn = pb.GenerateRequest(session=session, model=MODEL, input=[_event(_text("user", "hi"), "in2")],
                              memory=[_call("c3", too_deep)])
    assert await _violations(stub.Generate(turn)) == ["memory[0].parts[0].function_call.args"]
    update = pb.UpdateSessionRequest(session=session_pb2.Session(name=session, state=_struct(too_deep)))
    update.update_mask.paths.append("state")
    assert await _violations(stub.UpdateSession(update)) == ["session.state"]
    create = pb.CreateSessionRequest(parent="apps/app/users/u1", session=session_pb2.Session(state=_struct(too_deep)))
    assert await _violations(stub.CreateSession(create)) == ["session.state"]
    # One level less is accepted everywhere.
    update.session.state.CopyFrom(_struct(ok))
    assert json_format.MessageToDict((await stub.UpdateSession(update)).state) == ok


@pytest.mark.parametrize("shape", [objects, arrays])
async def test_every_message_path_carries_events_at_the_limit(
    limited: tuple[ServicePair, int], remote: RemoteCompactorServer, shape: Callable[[int], Any]
) -> None:
    pair, depth = limited
    stub, deep = pair.stub, shape(depth)
    received: list[compactor_service_pb2.CompactRequest] = []

    async def behave(request: compactor_service_pb2.CompactRequest, context: Any) -> bytes:
        received.append(request)
        return await answer("summary of deep things")

    remote.behavior = behave
    for kind in ("MODEL", "REMOTE", "EXTRACTIVE"):
        policy = policy_pb2.CompactionPolicy(keep_recent_tokens=10, compactor=getattr(policy_pb2, f"COMPACTOR_KIND_{kind}"))
        if kind == "REMOTE":
            policy.remote_target = remote.target
        session = await _session(stub, policy)
        history = [_text("user", "look it up"), _call("c1", deep), _result("c1", deep)]
        for i, content in enumerate(history):
            appended = await stub.AppendEvent(pb.AppendEventRequest(
                parent=session, event=_event(content, f"e{i}", metadata=deep)))
            assert json_format.MessageToDict(appended.event.custom_metadata) == deep
        listed = (await stub.ListEvents(pb.ListEventsRequest(parent=session))).events
        assert json_format.MessageToDict(listed[1].content.parts[0].function_call.args) == deep
        built = await stub.BuildContext(pb.BuildContextRequest(session=session, input=[_result("c9", deep)]))
        assert json_format.MessageToDict(built.request.contents[1].parts[0].function_call.args) == deep
        # The turn's input at the limit too, unary and streamed, through the cache service.
        unary = await stub.Generate(pb.GenerateRequest(
            session=session, model=MODEL, input=[_event(_call("c2", deep), "g1"), _event(_result("c2", deep), "g2")]))
        assert unary.reply.content.parts
        streamed = await _stream(stub, pb.GenerateRequest(session=session, model=MODEL, input=[_event(_text("user", "go"), "g3")]))
        assert streamed.reply.content.parts
        compacted = await stub.CompactSession(pb.CompactSessionRequest(session=session))
        assert compacted.compacted
        await _stream(stub, pb.GenerateRequest(session=session, model=MODEL, input=[_event(_text("user", "again"), "g4")]))
    sent = received[0].events[1].content.parts[0].function_call.args
    assert json_format.MessageToDict(sent) == deep, "the remote compactor got the event whole"


# --- what cannot be decoded ---------------------------------------------------------


def _deep_stream_request(depth: int) -> bytes:
    request = cache_service_pb2.StreamGenerateContentRequest()
    request.call.scope.app, request.call.scope.user, request.call.scope.model = "app", "u1", MODEL
    request.call.request.model = MODEL
    part = request.call.request.contents.add(role="model").parts.add()
    part.function_call.name = "lookup"
    part.function_call.args.update(objects(depth))
    return request.SerializeToString()


def _deep_context_request(request_type: Any, depth: int) -> bytes:
    request = request_type()
    if request_type is pb.AppendEventRequest:
        content = request.event.content
    elif request_type is pb.BuildContextRequest:
        content = request.input.add()
    else:
        content = request.turn.input.add().content
    content.role = "model"
    fc = content.parts.add().function_call
    fc.name = "lookup"
    fc.args.update(objects(depth))
    return request.SerializeToString()


def _raw(channel: grpc.aio.Channel, method: str, streaming: bool) -> Any:
    make = channel.unary_stream if streaming else channel.unary_unary
    return make(method, request_serializer=None, response_deserializer=None)


async def _undecodable(call: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        if hasattr(call, "__aiter__"):
            [x async for x in call]
        else:
            await call
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = error_from_rpc(exc.value)
    assert error.reason == "MALFORMED_REQUEST"
    assert "upb" not in (exc.value.details() or ""), "the decoder's own text stays inside"


async def test_undecodable_requests_are_invalid_argument_on_both_services(pair: ServicePair) -> None:
    _ = pair.cache_stub
    cache_channel = pair._cache_channel
    assert cache_channel is not None
    garbage = b"\x0a\xff\xff"
    cache, context = "/agentctx.cache.v1.CacheService/", "/agentctx.context.v1.ContextService/"
    calls = [
        (cache_channel, cache + "StreamGenerateContent", True, _deep_stream_request(40)),
        (cache_channel, cache + "GenerateContent", False, _deep_stream_request(40)),  # the same shape, one level up
        (pair.channel, context + "AppendEvent", False, _deep_context_request(pb.AppendEventRequest, 40)),
        (pair.channel, context + "BuildContext", False, _deep_context_request(pb.BuildContextRequest, 40)),
        (pair.channel, context + "StreamGenerate", True, _deep_context_request(pb.StreamGenerateRequest, 40)),
    ]
    for channel, method, streaming, too_deep in calls:
        for data in (too_deep, garbage):
            await _undecodable(_raw(channel, method, streaming)(data))
    for channel in (pair.channel, cache_channel):
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_session_stored_deeper_than_the_cache_decodes_is_a_precondition_not_internal(pair: ServicePair) -> None:
    """An event as deep as AppendEvent could decode before the limit (32
    object levels; written to the store directly here): Generate still
    works, and StreamGenerate, whose cache request is one level deeper, is
    FAILED_PRECONDITION with a reason instead of UNKNOWN with the cache
    service's parser text."""
    session = await _session(pair.stub)
    store = await open_store(f"sqlite:///{pair.tmp / 'context-data' / 'context.db'}")
    try:
        key = SessionKey("app", "u1", session.rsplit("/", 1)[1])
        call = Part(function_call=FunctionCall("c1", "lookup", objects(32)))
        await store.append_event(key, Event(id="legacy", author="agent", content=Content("model", (call,))))
    finally:
        await store.close()
    turn = pb.GenerateRequest(session=session, model=MODEL, input=[_event(_text("user", "go"), "g1")])
    assert (await pair.stub.Generate(turn)).reply.content.parts
    turn.input[0].id = "g2"
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await _stream(pair.stub, turn)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION, (exc.value.code(), exc.value.details())
    assert error_from_rpc(exc.value).reason == "CACHE_REQUEST_UNDECODABLE"
    assert "upb" not in (exc.value.details() or "")
