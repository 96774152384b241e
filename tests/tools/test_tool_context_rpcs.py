"""ToolContextService on a real server (SQLite and PostgreSQL): a tool
with nothing but its token (its connection's certificate grants no app)
reads and stages what its declaration allows; its staged writes become
visible with the function response and vanish at the deadline; every
misuse is PERMISSION_DENIED or UNAUTHENTICATED with its reason."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib

import grpc
import pytest
from google.protobuf import struct_pb2

from agentctx.context.v1 import artifacts_pb2 as apb
from agentctx.context.v1 import (
    artifacts_pb2_grpc,
    context_service_pb2_grpc,
    session_pb2,
    tool_context_pb2,
    tool_context_pb2_grpc,
)
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import content_pb2
from agentctx_client import error_from_rpc
from tests.support.servers import secure_channel
from tests.tools.conftest import Tools, with_token

NO_GRANT = "context-client"  # a dev certificate whose identity the context server grants no app


def _reason(err: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    error = error_from_rpc(err)
    return err.code(), str(getattr(error.reason, "name", error.reason)), dict(error.metadata)


async def _tool_stub(tools: Tools, certs: pathlib.Path) -> tuple[grpc.aio.Channel, tool_context_pb2_grpc.ToolContextServiceStub]:
    channel = secure_channel(tools.server.port, certs, NO_GRANT)
    return channel, tool_context_pb2_grpc.ToolContextServiceStub(channel)


async def _save(stub: tool_context_pb2_grpc.ToolContextServiceStub, token: str, name: str, text: str) -> apb.ArtifactVersion:
    async def requests():  # type: ignore[no-untyped-def]
        yield tool_context_pb2.SaveToolArtifactRequest(header=tool_context_pb2.SaveToolArtifactHeader(
            artifact=name, part=content_pb2.Part(text=text)))

    return (await stub.SaveToolArtifact(requests(), metadata=with_token(token))).artifact


async def _load(stub: tool_context_pb2_grpc.ToolContextServiceStub, token: str, name: str) -> str:
    data = b""
    async for item in stub.LoadToolArtifact(tool_context_pb2.LoadToolArtifactRequest(artifact=name),
                                            metadata=with_token(token)):
        data += item.data
    return data.decode()


async def test_token_is_the_only_credential_and_writes_land_with_the_response(
    tools: Tools, certs_dir: pathlib.Path
) -> None:
    session = await tools.session()
    await tools.agent.UpdateSession(pb.UpdateSessionRequest(
        session=session_pb2.Session(name=session, state=struct_pb2.Struct(fields={
            "city": struct_pb2.Value(string_value="Oslo")})),
        update_mask={"paths": ["state"]}))
    tokens = await tools.call(session, ("c1", "writer"))
    channel, stub = await _tool_stub(tools, certs_dir)
    async with channel:
        token = tokens["c1"]
        who = await stub.GetToolIdentity(tool_context_pb2.GetToolIdentityRequest(), metadata=with_token(token))
        assert (who.app, who.user, who.session, who.function_call_id, who.tool, who.event_id) == (
            "shop", "alice", session, "c1", "writer", "m1")
        assert who.capabilities[0] == "identity" and "state_write" in who.capabilities

        state = await stub.GetToolState(tool_context_pb2.GetToolStateRequest(), metadata=with_token(token))
        assert state.state["city"] == "Oslo"
        delta = session_pb2.StateDelta(session=struct_pb2.Struct(fields={"hits": struct_pb2.Value(number_value=1)}),
                                       user=struct_pb2.Struct(fields={"seen": struct_pb2.Value(bool_value=True)}))
        staged = await stub.UpdateToolState(tool_context_pb2.UpdateToolStateRequest(state_delta=delta),
                                            metadata=with_token(token))
        assert staged.state["hits"] == 1 and staged.user_state["seen"] is True
        saved = await _save(stub, token, "report.txt", "ready")
        assert saved.version == 0
        # The tool sees its own staged writes; nobody else does yet.
        assert await _load(stub, token, "report.txt") == "ready"
        artifacts = artifacts_pb2_grpc.ArtifactServiceStub(tools.channel)
        names = await artifacts.ListArtifactNames(apb.ListArtifactNamesRequest(parent=session))
        assert list(names.artifacts) == []
        got = await tools.agent.GetSession(pb.GetSessionRequest(name=session))
        assert "hits" not in got.state
        await stub.AttachToolArtifact(tool_context_pb2.AttachToolArtifactRequest(artifact="report.txt"),
                                      metadata=with_token(token))

        appended = await tools.respond(session, "c1", "writer")
        parts = appended.event.content.parts
        assert parts[0].function_response.id == "c1" and parts[1].text == "ready"
        got = await tools.agent.GetSession(pb.GetSessionRequest(name=session))
        assert got.state["hits"] == 1 and got.user_state["seen"] is True and got.state["city"] == "Oslo"
        names = await artifacts.ListArtifactNames(apb.ListArtifactNamesRequest(parent=session))
        assert list(names.artifacts) == ["report.txt"]

        # Revoked at once; a retry of the same append is still recognized.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetToolState(tool_context_pb2.GetToolStateRequest(), metadata=with_token(token))
        assert _reason(err.value)[:2] == (grpc.StatusCode.PERMISSION_DENIED, "TOOL_TOKEN_REVOKED")
        again = await tools.respond(session, "c1", "writer")
        assert again.deduplicated


async def test_capabilities_scope_and_bad_tokens(tools: Tools, certs_dir: pathlib.Path) -> None:
    session = await tools.session()
    other = await tools.session(sid="s2")
    tokens = await tools.call(session, ("c1", "reader"), ("c2", "undeclared"))
    channel, stub = await _tool_stub(tools, certs_dir)
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _save(stub, tokens["c1"], "x.txt", "no")
        code, reason, metadata = _reason(err.value)
        assert (code, reason, metadata["capability"], metadata["tool"]) == (
            grpc.StatusCode.PERMISSION_DENIED, "TOOL_CAPABILITY_MISSING", "artifact_put", "reader")
        # An undeclared tool gets identity only.
        who = await stub.GetToolIdentity(tool_context_pb2.GetToolIdentityRequest(), metadata=with_token(tokens["c2"]))
        assert list(who.capabilities) == ["identity"]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetToolState(tool_context_pb2.GetToolStateRequest(), metadata=with_token(tokens["c2"]))
        assert _reason(err.value)[1] == "TOOL_CAPABILITY_MISSING"

        good = tokens["c1"]
        head, payload, mac = good.split(".")
        for bad in ("", good[:-3], f"{head}.{payload}", f"{head}.{payload[:-2]}AA.{mac}", good + "x", "tt1.e30.AAAA"):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetToolIdentity(tool_context_pb2.GetToolIdentityRequest(), metadata=with_token(bad))
            assert _reason(err.value)[:2] == (grpc.StatusCode.UNAUTHENTICATED,
                                               "TOOL_TOKEN_MISSING" if not bad else "TOOL_TOKEN_INVALID")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetToolIdentity(tool_context_pb2.GetToolIdentityRequest())
        assert _reason(err.value)[1] == "TOOL_TOKEN_MISSING"

        # The agent's own RPCs are not opened by a token.
        plain = context_service_pb2_grpc.ContextServiceStub(channel)
        for name in (session, other):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await plain.GetSession(pb.GetSessionRequest(name=name), metadata=with_token(good))
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_memory_through_a_token_stays_in_its_user(tools: Tools, certs_dir: pathlib.Path) -> None:
    session = await tools.session()
    await tools.session(user="bob", sid="b1")
    tokens = await tools.call(session, ("c1", "writer"))
    channel, stub = await _tool_stub(tools, certs_dir)
    async with channel:
        meta = with_token(tokens["c1"])
        entry = await stub.AddToolMemory(tool_context_pb2.AddToolMemoryRequest(text="prefers window seats"),
                                         metadata=meta)
        assert entry.session == session and entry.event_id == "m1"
        found = await stub.SearchToolMemory(tool_context_pb2.SearchToolMemoryRequest(query="window"), metadata=meta)
        assert [m.memory.name for m in found.matches] == [entry.name]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.DeleteToolMemory(tool_context_pb2.DeleteToolMemoryRequest(
                name=entry.name.replace("/alice/", "/bob/")), metadata=meta)
        assert _reason(err.value)[1] == "TOOL_SCOPE_MISMATCH"
        await stub.DeleteToolMemory(tool_context_pb2.DeleteToolMemoryRequest(name=entry.name), metadata=meta)


@contextlib.asynccontextmanager
async def _one_writer(server_factory, certs_dir: pathlib.Path, **overrides: object):  # type: ignore[no-untyped-def]
    """A server with ``overrides``, a session whose model called "writer"
    once: (the agent's Tools, the session, the call's tokens, the tool's stub)."""
    from tests.tools.conftest import KEYS
    server = await server_factory(tool_token_keys=KEYS, require_client_cert=True, **overrides)
    async with secure_channel(server.port, certs_dir) as channel:
        tools = Tools(server, channel)
        session = await tools.session()
        tokens = await tools.call(session, ("c1", "writer"))
        tool_channel, stub = await _tool_stub(tools, certs_dir)
        async with tool_channel:
            yield tools, session, tokens, stub


async def test_staged_writes_are_dropped_at_the_deadline(server_factory, certs_dir: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    async with _one_writer(server_factory, certs_dir, tool_token_ttl_s=1.0) as (tools, session, tokens, stub):
        await _save(stub, tokens["c1"], "late.txt", "too late")
        await asyncio.sleep(1.2)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetToolIdentity(tool_context_pb2.GetToolIdentityRequest(),
                                       metadata=with_token(tokens["c1"]))
        assert _reason(err.value)[:2] == (grpc.StatusCode.PERMISSION_DENIED, "TOOL_TOKEN_EXPIRED")
        # The response comes late: nothing staged lands, its bytes are gone.
        appended = await tools.respond(session, "c1", "writer")
        assert len(appended.event.content.parts) == 1
        artifacts = artifacts_pb2_grpc.ArtifactServiceStub(tools.channel)
        versions = await artifacts.ListArtifactVersions(apb.ListArtifactVersionsRequest(parent=session,
                                                                                         artifact="late.txt"))
        assert list(versions.versions) == []


async def test_a_tool_save_refused_mid_stream_gets_its_status(server_factory, certs_dir: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    """Past max_artifact_bytes while the tool is still sending: the tool
    sees RESOURCE_EXHAUSTED ARTIFACT_TOO_LARGE (never INTERNAL), and nothing
    is staged."""
    async with _one_writer(server_factory, certs_dir, max_artifact_bytes=1024 * 1024) as (_, _, tokens, stub):
        async def big():  # type: ignore[no-untyped-def]
            yield tool_context_pb2.SaveToolArtifactRequest(header=tool_context_pb2.SaveToolArtifactHeader(
                artifact="big.bin", part=content_pb2.Part(inline_data=content_pb2.Blob(mime_type="x/y"))))
            for _ in range(12):
                yield tool_context_pb2.SaveToolArtifactRequest(data=b"z" * (256 * 1024))

        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SaveToolArtifact(big(), metadata=with_token(tokens["c1"]))
        assert _reason(err.value)[:2] == (grpc.StatusCode.RESOURCE_EXHAUSTED, "ARTIFACT_TOO_LARGE")
        listed = await stub.ListToolArtifactNames(tool_context_pb2.ListToolArtifactNamesRequest(),
                                                  metadata=with_token(tokens["c1"]))
        assert list(listed.artifacts) == []
