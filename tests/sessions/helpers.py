"""Builders and checks shared by the session tests."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import event_pb2
from agentctx_common.errors import AgentCtxError
from agentctx_common.status import error_from_rpc
from context_service.domain.model import Content, Event, FunctionCall, FunctionResponse, Part
from context_service.storage import schema
from context_service.storage.engine import create_engine


async def migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await schema.upgrade(engine)
    finally:
        await engine.dispose()


def text_event(event_id: str = "", text: str = "hello", *, role: str = "user", author: str | None = None) -> Event:
    return Event(id=event_id, author=author or role, content=Content(role, (Part(text=text),)))


def call_event(event_id: str, call_id: str = "c1", name: str = "get_weather") -> Event:
    return Event(
        id=event_id, author="agent",
        content=Content("model", (Part(function_call=FunctionCall(call_id, name, {"city": "Paris"})),)),
    )


def response_event(event_id: str, call_id: str = "c1", name: str = "get_weather") -> Event:
    return Event(
        id=event_id, author="user",
        content=Content("user", (Part(function_response=FunctionResponse(call_id, name, {"temp": 21})),)),
    )


def pb_text_event(event_id: str = "", text: str = "hello", *, role: str = "user") -> event_pb2.Event:
    e = event_pb2.Event(id=event_id, author=role)
    e.content.role = role
    e.content.parts.add().text = text
    return e


def append_request(parent: str, event: event_pb2.Event, **kwargs: Any) -> pb.AppendEventRequest:
    return pb.AppendEventRequest(parent=parent, event=event, **kwargs)


async def rpc_error(call: Awaitable[Any]) -> AgentCtxError:
    """The rich error a call fails with (it must fail)."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return error_from_rpc(info.value)


def fields(err: AgentCtxError) -> list[str]:
    return [v.field for v in err.field_violations]
