"""Client-side helpers for compaction tests over gRPC."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.errors import AgentCtxError
from agentctx_common.status import error_from_rpc
from context_service.domain.model import SessionKey
from context_service.domain.selection.records import SUMMARY_PREFIX

APP = "app1"
KEY = SessionKey(APP, "u1", "s1")
SESSION = KEY.name

Stub = context_service_pb2_grpc.ContextServiceStub


def text(role: str, value: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=value)])


def call(call_id: str, name: str = "read_file", args: dict | None = None) -> content_pb2.Content:
    c = content_pb2.Content(role="model")
    p = c.parts.add()
    p.function_call.id, p.function_call.name = call_id, name
    p.function_call.args.update(args or {"path": f"src/{name}.py"})
    return c


def result(call_id: str, name: str = "read_file", response: dict | None = None) -> content_pb2.Content:
    c = content_pb2.Content(role="user")
    p = c.parts.add()
    p.function_response.id, p.function_response.name = call_id, name
    p.function_response.response.update(response or {"result": "ok"})
    return c


async def create(stub: Stub, compaction: policy_pb2.CompactionPolicy | None = None, name: str = SESSION,
                 selection: policy_pb2.SelectionPolicy | None = None) -> session_pb2.Session:
    parent, _, session_id = name.rpartition("/sessions/")
    session = session_pb2.Session()
    if compaction is not None:
        session.config.compaction.CopyFrom(compaction)
    if selection is not None:
        session.config.selection.CopyFrom(selection)
    return await stub.CreateSession(pb.CreateSessionRequest(parent=parent, session_id=session_id, session=session))


async def append(stub: Stub, content: content_pb2.Content, name: str = SESSION, **fields: Any) -> event_pb2.Event:
    author = fields.pop("author", "user" if content.role == "user" else "agent")
    event = event_pb2.Event(author=author, content=content, **fields)
    return (await stub.AppendEvent(pb.AppendEventRequest(parent=name, event=event))).event


async def compact(stub: Stub, name: str = SESSION, **fields: Any) -> pb.CompactSessionResponse:
    return await stub.CompactSession(pb.CompactSessionRequest(session=name, **fields))


async def build(stub: Stub, name: str = SESSION, **fields: Any) -> pb.BuildContextResponse:
    fields.setdefault("input", [text("user", "what next?")])
    return await stub.BuildContext(pb.BuildContextRequest(session=name, **fields))


async def events(stub: Stub, name: str = SESSION, include_compactions: bool = True) -> list[event_pb2.Event]:
    out: list[event_pb2.Event] = []
    token = ""
    while True:
        page = await stub.ListEvents(pb.ListEventsRequest(
            parent=name, include_compactions=include_compactions, page_size=1000, page_token=token
        ))
        out.extend(page.events)
        token = page.next_page_token
        if not token:
            return out


async def rpc_error(call_: Awaitable[Any]) -> AgentCtxError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call_
    return error_from_rpc(info.value)


def check_request_shape(contents: list[content_pb2.Content]) -> None:
    """What a provider accepts: every function response has its call before
    it, and a summary, if any, opens the history (never a stale one later)."""
    calls: set[str] = set()
    for i, c in enumerate(contents):
        for p in c.parts:
            if p.HasField("function_call"):
                calls.add(p.function_call.id)
            if p.HasField("function_response"):
                assert p.function_response.id in calls, f"result {p.function_response.id} without its call"
            if p.HasField("text") and p.text.startswith(SUMMARY_PREFIX):
                assert i == 0, "a summary inside the kept history"


def summary_of(reply: pb.BuildContextResponse) -> str:
    first = reply.request.contents[0].parts[0]
    assert first.text.startswith(SUMMARY_PREFIX)
    return first.text[len(SUMMARY_PREFIX):]
