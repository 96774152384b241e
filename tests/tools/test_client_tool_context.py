"""agentctx_client.ToolContext on a real server (SQLite and PostgreSQL): a
tool holding nothing but its token (its connection's certificate grants no
app) reads, stages and deletes what its declaration allows through typed
calls; failures are the client's exceptions with the TOOL_* reasons. Then
ContextClient's side: ``mint_tool_tokens``, and a Generate on a real
pair whose reply calls a declared tool carries a typed ``ToolToken`` the
tool uses before the function response collects its writes."""

from __future__ import annotations

import pathlib

import pytest

from agentctx.context.v1 import policy_pb2
from agentctx_client import (
    Content,
    ContextClient,
    ErrorReason,
    Event,
    FunctionCall,
    FunctionDeclaration,
    PermissionDeniedError,
    TlsConfig,
    ToolContext,
    ToolToken,
    UnauthenticatedError,
    user_parent,
)
from tests.support.pair import start_pair
from tests.tools.conftest import DECLARED, Tools

NO_GRANT = "context-client"  # a dev certificate whose identity the context server grants no app
EVERYTHING = policy_pb2.ToolDeclaration(name="writer", capabilities=[
    "state_read", "state_write", "artifact_put", "artifact_get", "artifact_list", "artifact_list_versions",
    "artifact_delete", "artifact_attach", "memory_search", "memory_add", "memory_delete"])


def _tool(token: str | ToolToken, port: int, certs: pathlib.Path) -> ToolContext:
    tls = TlsConfig(ca=certs / "ca.pem", cert=certs / f"{NO_GRANT}.pem", key=certs / f"{NO_GRANT}.key",
                    server_name="localhost")
    return ToolContext.connect(token, f"127.0.0.1:{port}", tls=tls, timeout=60)


async def _minted(tools: Tools, session: str, *calls: tuple[str, str]) -> dict[str, ToolToken]:
    """Appends a model event calling ``calls`` ((id, tool) pairs) and mints
    their tokens through the client: {call id: token}."""
    client = ContextClient(tools.channel, timeout=60)
    appended = await client.append_event(session, Event(author="agent", content=Content.model(
        *(FunctionCall(name=name, id=cid) for cid, name in calls))))
    minted = await client.mint_tool_tokens(session, appended.event.id)
    return {t.function_call_id: t for t in minted}


async def test_a_tool_works_through_its_token_alone(tools: Tools, certs_dir: pathlib.Path) -> None:
    agent = ContextClient(tools.channel, timeout=60)
    session = await tools.session(tools=[EVERYTHING])
    await agent.update_session(session, state={"city": "Oslo"})
    tokens = await _minted(tools, session, ("c1", "writer"))
    token = tokens["c1"]
    assert (token.tool, token.capabilities[0], token.expire_time is not None) == ("writer", "identity", True)
    assert token.token not in repr(token) and token.token not in str(tokens)

    async with _tool(token, tools.server.port, certs_dir) as tool:
        assert token.token not in repr(tool)
        who = await tool.identity()
        assert (who.app, who.user, who.session, who.function_call_id, who.tool) == (
            "shop", "alice", session, "c1", "writer")
        assert who.capabilities == token.capabilities and who.expire_time == token.expire_time

        assert (await tool.state()).state == {"city": "Oslo"}
        staged = await tool.update_state(session={"hits": 1}, user={"seen": True})
        assert staged.state == {"city": "Oslo", "hits": 1} and staged.user_state == {"seen": True}

        saved = await tool.save_artifact("report.txt", "ready", custom_metadata={"by": "writer"})
        assert (saved.artifact, saved.version, saved.text, saved.custom_metadata) == (
            "report.txt", 0, True, {"by": "writer"})
        png = b"\x89PNG" + bytes(range(256)) * 40
        image = await tool.save_artifact("user:chart.png", [png[:5000], png[5000:]], mime_type="image/png",
                                         chunk_bytes=1000)
        assert (image.parent, image.size_bytes) == (user_parent("shop", "alice"), len(png))
        # The tool sees its own staged saves; the agent does not, yet.
        assert (await tool.load_artifact("report.txt")).text == "ready"
        meta, chunks = await tool.open_artifact("user:chart.png")
        assert meta.mime_type == "image/png" and b"".join([c async for c in chunks]) == png
        assert sorted(await tool.list_artifacts()) == ["report.txt", "user:chart.png"]
        assert [v.version for v in await tool.list_artifact_versions("report.txt")] == [0]
        assert await agent.list_artifacts(session) == []
        await tool.save_artifact("scratch.txt", "gone soon")
        assert await tool.delete_artifact("scratch.txt") == 1
        attached = await tool.attach_artifact("report.txt")
        assert attached.version == 0

        entry = await tool.add_memory("prefers window seats", metadata={"kind": "preference"})
        assert (entry.session, entry.author, entry.metadata) == (session, "writer", {"kind": "preference"})
        found = await tool.search_memory("window", metadata_filter={"kind": "preference"}, limit=5)
        assert [m.memory.name for m in found] == [entry.name]
        await tool.delete_memory(entry.name)
        assert await tool.search_memory("window") == []

        assert (await agent.get_session(session)).state == {"city": "Oslo"}
        appended = await tools.respond(session, "c1", "writer")
        assert [p.text for p in appended.event.content.parts][1:] == ["ready"]  # the attachment
        got = await agent.get_session(session)
        assert got.state == {"city": "Oslo", "hits": 1} and got.user_state == {"seen": True}
        assert sorted(await agent.list_artifacts(session)) == ["report.txt", "user:chart.png"]

        with pytest.raises(PermissionDeniedError) as err:
            await tool.state()
        assert err.value.reason == ErrorReason.TOOL_TOKEN_REVOKED


async def test_refusals_are_typed_errors_with_their_reasons(tools: Tools, certs_dir: pathlib.Path) -> None:
    session = await tools.session()
    await tools.session(user="bob", sid="b1")
    tokens = await _minted(tools, session, ("c1", "reader"), ("c2", "writer"))
    async with _tool(tokens["c1"].token, tools.server.port, certs_dir) as reader:
        with pytest.raises(PermissionDeniedError) as denied:
            await reader.save_artifact("x.txt", "no")
        assert denied.value.reason == ErrorReason.TOOL_CAPABILITY_MISSING
        assert (denied.value.metadata["capability"], denied.value.metadata["tool"]) == ("artifact_put", "reader")
        with pytest.raises(PermissionDeniedError) as denied:
            await reader.update_state(session={"x": 1})
        assert denied.value.metadata["capability"] == "state_write"
        assert await reader.list_artifacts() == []
    async with _tool(tokens["c2"], tools.server.port, certs_dir) as writer:
        entry = await writer.add_memory("a note")
        with pytest.raises(PermissionDeniedError) as denied:
            await writer.delete_memory(entry.name.replace("/alice/", "/bob/"))
        assert denied.value.reason == ErrorReason.TOOL_SCOPE_MISMATCH
    async with _tool(tokens["c2"].token[:-4], tools.server.port, certs_dir) as forged:
        with pytest.raises(UnauthenticatedError) as bad:
            await forged.identity()
        assert bad.value.reason == ErrorReason.TOOL_TOKEN_INVALID
    with pytest.raises(ValueError, match="tool token"):
        ToolContext("", tools.channel)


async def test_generate_hands_out_typed_tokens_for_declared_tools(certs_dir: pathlib.Path,
                                                                  tmp_path: pathlib.Path) -> None:
    pair = await start_pair(certs_dir, tmp_path / "pair")
    try:
        agent = ContextClient(pair.channel, timeout=60)
        session = await agent.create_session("shop", "alice", model="local-sim-1",
                                             config=policy_pb2.ContextConfig(tools=DECLARED))
        writer = FunctionDeclaration("writer", "Writes the report.", {"type": "object", "properties": {}})
        turn = await agent.generate(session.name, "Please call writer now.", tools=[writer])
        (call,) = turn.function_calls
        token = turn.tool_token(call)
        assert token is not None and [t.function_call_id for t in turn.tool_tokens] == [call.id]
        assert "state_write" in token.capabilities and token.token not in repr(turn)

        # A tool in the agent's process, on the agent's channel: the token
        # is still the only credential its calls carry.
        tool = agent.tool_context(token)
        await tool.update_state(session={"report": "draft"})
        await tool.save_artifact("report.md", "# Report")
        assert "report" not in (await agent.get_session(session.name)).state

        answer = await agent.generate(session.name, call.result({"ok": True}), tools=[writer])
        assert answer.tool_tokens == () and answer.tool_token(call) is None
        assert (await agent.get_session(session.name)).state == {"report": "draft"}
        assert (await agent.load_artifact(session.name, "report.md")).text == "# Report"
        with pytest.raises(PermissionDeniedError) as err:
            await tool.load_artifact("report.md")
        assert err.value.reason == ErrorReason.TOOL_TOKEN_REVOKED
    finally:
        await pair.close()
