"""Tool context fixtures: a real context server on each backend (the
session tests' ``server_factory``) with a shared tool token key set, the
agent's stub (its certificate grants every app) and token-only stubs."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import (
    context_service_pb2_grpc,
    policy_pb2,
    session_pb2,
    tool_context_pb2,
    tool_context_pb2_grpc,
)
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.server import GrpcServer
from tests.sessions.conftest import ServerFactory, server_factory
from tests.support.servers import secure_channel

__all__ = ["KEYS", "ServerFactory", "Tools", "server_factory"]

KEYS = [{"id": "k1", "secret": "a" * 40}]
DECLARED = [
    policy_pb2.ToolDeclaration(name="reader", capabilities=["state_read", "artifact_get", "artifact_list",
                                                            "artifact_list_versions", "memory_search"]),
    policy_pb2.ToolDeclaration(name="writer", capabilities=[
        "state_read", "state_write", "artifact_put", "artifact_get", "artifact_list", "artifact_delete",
        "artifact_attach", "memory_add", "memory_delete", "memory_search"]),
]


class Tools:
    """The agent's stub and a way to a token's tool context."""

    def __init__(self, server: GrpcServer, channel: grpc.aio.Channel) -> None:
        self.server = server
        self.channel = channel
        self.agent = context_service_pb2_grpc.ContextServiceStub(channel)
        self.tool = tool_context_pb2_grpc.ToolContextServiceStub(channel)

    async def session(self, app: str = "shop", user: str = "alice", sid: str = "s1",
                      tools: list[policy_pb2.ToolDeclaration] | None = None) -> str:
        config = policy_pb2.ContextConfig(tools=DECLARED if tools is None else tools)
        created = await self.agent.CreateSession(pb.CreateSessionRequest(
            parent=f"apps/{app}/users/{user}", session_id=sid, session=session_pb2.Session(config=config)))
        return created.name

    async def call(self, session: str, *calls: tuple[str, str], event_id: str = "m1") -> dict[str, str]:
        """Appends a model event calling ``calls`` ((id, tool) pairs) and
        mints their tokens: {call id: token}."""
        event = event_pb2.Event(id=event_id, author="agent", content=content_pb2.Content(role="model", parts=[
            content_pb2.Part(function_call=content_pb2.FunctionCall(id=cid, name=name)) for cid, name in calls]))
        await self.agent.AppendEvent(pb.AppendEventRequest(parent=session, event=event))
        minted = await self.agent.MintToolTokens(tool_context_pb2.MintToolTokensRequest(session=session, event_id=event_id))
        return {t.function_call_id: t.token for t in minted.tokens}

    async def respond(self, session: str, call_id: str, name: str, event_id: str = "", **extra: Any) -> Any:
        event = event_pb2.Event(id=event_id or f"r-{call_id}", author="user", content=content_pb2.Content(
            role="user", parts=[content_pb2.Part(function_response=content_pb2.FunctionResponse(
                id=call_id, name=name, response={"ok": True}))]))
        return await self.agent.AppendEvent(pb.AppendEventRequest(parent=session, event=event, **extra))


def with_token(token: str) -> tuple[tuple[str, str], ...]:
    return (("agentctx-tool-token", token),)


@pytest.fixture
async def tools(server_factory: ServerFactory, certs_dir: pathlib.Path) -> AsyncIterator[Tools]:
    server = await server_factory(tool_token_keys=KEYS, require_client_cert=True)
    async with secure_channel(server.port, certs_dir) as channel:
        yield Tools(server, channel)
