"""Tool tokens under attack and across replicas (issue 23, point 6): a
token used on another session's or app's things, after its response,
after its deadline (test_tool_context_rpcs), with an undeclared
capability, replayed after its key rotated out, forged or truncated; valid
on a second replica and revoked on both by one append; and never in logs,
spans or any database table. Fuzzed requests with a live token never get
INTERNAL."""

from __future__ import annotations

import json
import logging
import pathlib
import random

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.ext.asyncio import create_async_engine

from agentctx.context.v1 import artifacts_pb2 as apb
from agentctx.context.v1 import artifacts_pb2_grpc, tool_context_pb2, tool_context_pb2_grpc
from agentctx_client import error_from_rpc
from context_service.storage.engine import normalize_url
from tests.e2e.test_fuzzed_requests import BAD, _call, _methods, fill, mutate
from tests.support.servers import secure_channel
from tests.support.spans import span_exporter
from tests.tools.conftest import KEYS, ServerFactory, Tools, with_token

IDENTITY = tool_context_pb2.GetToolIdentityRequest()


async def _refusal(call: object) -> tuple[str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call  # type: ignore[misc]
    error = error_from_rpc(err.value)
    return err.value.code().name, error.reason_name


async def _one_save(parent: str):  # type: ignore[no-untyped-def]
    yield apb.SaveArtifactRequest(header=apb.SaveArtifactHeader(parent=parent, artifact="secret.txt",
                                                               part={"text": "not yours"}))


async def test_a_token_reaches_only_its_own_session_user_and_app(tools: Tools, certs_dir: pathlib.Path) -> None:
    mine = await tools.session()
    theirs = await tools.session(sid="s2")
    other_app = await tools.session(app="other", sid="o1")
    artifacts = artifacts_pb2_grpc.ArtifactServiceStub(tools.channel)
    for parent in (theirs, other_app):
        await artifacts.SaveArtifact(_one_save(parent))
    tokens = await tools.call(mine, ("c1", "writer"))
    async with secure_channel(tools.server.port, certs_dir, "context-client") as channel:
        stub = tool_context_pb2_grpc.ToolContextServiceStub(channel)
        meta = with_token(tokens["c1"])
        listed = await stub.ListToolArtifactNames(tool_context_pb2.ListToolArtifactNamesRequest(), metadata=meta)
        assert list(listed.artifacts) == []
        code, reason = await _refusal(stub.LoadToolArtifact(
            tool_context_pb2.LoadToolArtifactRequest(artifact="secret.txt"), metadata=meta).read())
        assert (code, reason) == ("NOT_FOUND", "ARTIFACT_NOT_FOUND")
        for name in ("apps/other/users/alice/memories/m1", "apps/shop/users/bob/memories/m1"):
            code, reason = await _refusal(stub.DeleteToolMemory(tool_context_pb2.DeleteToolMemoryRequest(name=name),
                                                                metadata=meta))
            assert (code, reason) == ("PERMISSION_DENIED", "TOOL_SCOPE_MISMATCH")
        # The other session's token does not see this one's either: a token names its scope, the request cannot.
        others = await tools.call(theirs, ("c9", "reader"), event_id="m9")
        who = await stub.GetToolIdentity(IDENTITY, metadata=with_token(others["c9"]))
        assert who.session == theirs


async def test_key_rotation_and_replicas(server_factory: ServerFactory, certs_dir: pathlib.Path) -> None:
    k2 = {"id": "k2", "secret": "b" * 40}
    first = await server_factory(tool_token_keys=KEYS)
    # A second replica mid-rotation: it signs with k2 and still accepts k1.
    second = await server_factory(tool_token_keys=[*KEYS, k2], active_tool_token_key_id="k2")
    async with secure_channel(first.port, certs_dir) as ch1, secure_channel(second.port, certs_dir) as ch2:
        one, two = Tools(first, ch1), Tools(second, ch2)
        session = await one.session()
        tokens = await one.call(session, ("a", "reader"), ("b", "reader"))
        later = await two.call(session, ("c", "reader"), event_id="m2")
        stub1 = tool_context_pb2_grpc.ToolContextServiceStub(ch1)
        stub2 = tool_context_pb2_grpc.ToolContextServiceStub(ch2)
        for stub in (stub1, stub2):
            await stub.GetToolIdentity(IDENTITY, metadata=with_token(tokens["a"]))
        # k2's token is unknown to the replica that never had k2.
        assert await _refusal(stub1.GetToolIdentity(IDENTITY, metadata=with_token(later["c"]))) == (
            "UNAUTHENTICATED", "TOOL_TOKEN_INVALID")
        await stub2.GetToolIdentity(IDENTITY, metadata=with_token(later["c"]))
        # One append on replica 1 revokes on both.
        await one.respond(session, "a", "reader")
        for stub in (stub1, stub2):
            assert await _refusal(stub.GetToolIdentity(IDENTITY, metadata=with_token(tokens["a"]))) == (
                "PERMISSION_DENIED", "TOOL_TOKEN_REVOKED")
    # Rotated past k1's life: a replica holding only k2 refuses k1's tokens.
    third = await server_factory(tool_token_keys=[k2])
    async with secure_channel(third.port, certs_dir) as ch3:
        stub3 = tool_context_pb2_grpc.ToolContextServiceStub(ch3)
        assert await _refusal(stub3.GetToolIdentity(IDENTITY, metadata=with_token(tokens["b"]))) == (
            "UNAUTHENTICATED", "TOOL_TOKEN_INVALID")
        await stub3.GetToolIdentity(IDENTITY, metadata=with_token(later["c"]))


async def test_no_token_in_logs_spans_or_the_database(
    tools: Tools, certs_dir: pathlib.Path, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    exporter = span_exporter()
    session = await tools.session()
    tokens = await tools.call(session, ("c1", "writer"), ("c2", "reader"))
    async with secure_channel(tools.server.port, certs_dir, "context-client") as channel:
        stub = tool_context_pb2_grpc.ToolContextServiceStub(channel)
        meta = with_token(tokens["c1"])
        await stub.GetToolState(tool_context_pb2.GetToolStateRequest(), metadata=meta)
        await stub.AddToolMemory(tool_context_pb2.AddToolMemoryRequest(text="likes tea"), metadata=meta)
        await _refusal(stub.UpdateToolState(tool_context_pb2.UpdateToolStateRequest(),
                                            metadata=with_token(tokens["c2"])))
        await _refusal(stub.GetToolIdentity(IDENTITY, metadata=with_token(tokens["c1"][:-2])))
    await tools.respond(session, "c1", "writer")
    secrets = {piece for token in tokens.values() for piece in (token, token.rsplit(".", 1)[1])}
    logged = "\n".join(f"{r.getMessage()} {json.dumps(r.__dict__, default=str)}" for r in caplog.records)
    spans = "\n".join(json.dumps({"name": s.name, "attributes": dict(s.attributes or {}),
                                  "events": [dict(e.attributes or {}) for e in s.events]}, default=str)
                      for s in exporter.get_finished_spans())
    engine = create_async_engine(normalize_url(db_url))
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
            rows = []
            for name in names:
                rows += [repr(tuple(r)) for r in (await conn.execute(sa.text(f'SELECT * FROM "{name}"'))).all()]
    finally:
        await engine.dispose()
    stored = "\n".join(rows)
    assert "tool_calls" in names and len(rows) > 0
    for secret in secrets:
        assert secret not in logged
        assert secret not in spans
        assert secret not in stored


async def test_fuzzed_tool_requests_never_get_internal(tools: Tools, certs_dir: pathlib.Path) -> None:
    session = await tools.session()
    tokens = await tools.call(session, *((f"c{i}", "writer") for i in range(4)))
    valid = {
        "GetToolIdentity": {}, "GetToolState": {}, "ListToolArtifactNames": {},
        "UpdateToolState": {"state_delta": {"session": {"k": 1}, "user": {"u": [1]}, "app": {"a": "x"}}},
        "LoadToolArtifact": {"artifact": "a.txt"}, "ListToolArtifactVersions": {"artifact": "a.txt"},
        "DeleteToolArtifact": {"artifact": "a.txt", "version": "0"},
        "AttachToolArtifact": {"artifact": "a.txt"},
        "SearchToolMemory": {"query": "tea", "metadata_filter": {"k": "v"}, "limit": 5},
        "AddToolMemory": {"text": "tea", "metadata": {"k": "v"}},
        "DeleteToolMemory": {"name": "apps/shop/users/alice/memories/m1"},
    }
    rng = random.Random(20261204)
    service = "agentctx.context.v1.ToolContextService"
    seen: dict[str, set[str]] = {}
    async with secure_channel(tools.server.port, certs_dir, "context-client") as channel:
        for method, request_type, streaming in _methods(tool_context_pb2, "ToolContextService"):
            if method == "SaveToolArtifact":
                continue  # client streaming: covered by the RPC tests
            for i in range(24):
                token = rng.choice(list(tokens.values()))
                if i % 3 == 0 or not request_type.DESCRIPTOR.fields:
                    request = fill(request_type(), rng)
                else:
                    request = mutate(json_format.ParseDict(valid[method], request_type()), rng)
                if i % 5 == 4:
                    token = token[: rng.randrange(len(token))]
                code = await _call_with(channel, service, method, request, streaming, token)
                seen.setdefault(method, set()).add(code.name)
                assert code not in BAD, f"{method} answered {code.name} to {request}"
    assert len(seen) == len(valid)


async def _call_with(channel: grpc.aio.Channel, service: str, method: str, request: object, streaming: bool,
                     token: str) -> grpc.StatusCode:
    path = f"/{service}/{method}"
    kwargs = dict(request_serializer=lambda m: m.SerializeToString(), response_deserializer=lambda b: b)
    try:
        if streaming:
            async for _ in channel.unary_stream(path, **kwargs)(request, timeout=20, metadata=with_token(token)):
                pass
        else:
            await channel.unary_unary(path, **kwargs)(request, timeout=20, metadata=with_token(token))
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


__all__ = ["_call"]
