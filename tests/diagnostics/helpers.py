"""Builders shared by the diagnostics tests: sessions seeded with content
that must never show in a diagnostic, and caches planted in a session's
scope through the cache service itself."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2
from agentctx.type.v1 import event_pb2
from tests.cache import protos

APP, USER = "diag-app", "diag-user"
MODEL = "local-sim-1"
# Planted in events, tool args, state and scope labels: none may show up in
# a diagnostic response, log or span.
SECRET = "sk-live-DIAG-7f3a9c2e51"
CONTENT = "CONFIDENTIAL-PLAN-alpha-bravo"
LABEL_VALUE = "LABEL-VALUE-charlie"


def session_name(session: str) -> str:
    return f"apps/{APP}/users/{USER}/sessions/{session}"


def config(*, labels: dict[str, Any] | None = None, model: str = MODEL) -> policy_pb2.ContextConfig:
    c = policy_pb2.ContextConfig(model=model)
    c.cache.enabled = True
    if labels:
        c.cache.scope_policy.update(labels)
    return c


async def create_session(
    agent: context_service_pb2_grpc.ContextServiceStub, session: str, *, labels: dict[str, Any] | None = None,
    turns: int = 6,
) -> str:
    s = session_pb2.Session(config=config(labels=labels))
    s.state.update({"plan": CONTENT, "api_key": SECRET})
    await agent.CreateSession(pb.CreateSessionRequest(parent=f"apps/{APP}/users/{USER}", session_id=session, session=s))
    name = session_name(session)
    for i in range(turns):
        await agent.AppendEvent(pb.AppendEventRequest(parent=name, event=_text(f"u{i}", "user", f"{CONTENT} step {i} " * 40)))
        call = event_pb2.Event(id=f"c{i}", author="agent")
        call.content.role = "model"
        fc = call.content.parts.add().function_call
        fc.id, fc.name = f"call-{i}", "deploy"
        fc.args.update({"token": SECRET, "target": CONTENT})
        await agent.AppendEvent(pb.AppendEventRequest(parent=name, event=call))
        resp = event_pb2.Event(id=f"r{i}", author="user")
        resp.content.role = "user"
        fr = resp.content.parts.add().function_response
        fr.id, fr.name = f"call-{i}", "deploy"
        fr.response.update({"result": CONTENT, "password": SECRET})
        await agent.AppendEvent(pb.AppendEventRequest(parent=name, event=resp))
    return name


async def compact(agent: context_service_pb2_grpc.ContextServiceStub, name: str) -> pb.CompactSessionResponse:
    """A manual compaction keeping only a small recent tail."""
    request = pb.CompactSessionRequest(session=name)
    request.policy.keep_recent_tokens = 600
    return await agent.CompactSession(request, timeout=10)


def _text(event_id: str, role: str, body: str) -> event_pb2.Event:
    e = event_pb2.Event(id=event_id, author=role)
    e.content.role = role
    e.content.parts.add().text = body
    return e


async def plant_cache(
    cache: cache_service_pb2_grpc.CacheServiceStub, *, labels: dict[str, Any] | None = None, model: str = MODEL,
) -> cpb.AcquireLeaseResponse:
    """A live cache in the (APP, USER, model, labels) scope: the first
    acquisition is a first sighting, the second creates."""
    request = protos.acquire(20, model=model, app=APP, user=USER, policy=labels or {})
    await cache.AcquireLease(request, timeout=10)
    reply = await cache.AcquireLease(request, timeout=10)
    assert reply.lease, reply
    return reply


def confirmation(session_id: str, current_fingerprint: str, **changes: str) -> pb.InvalidationConfirmation:
    values = dict(app=APP, user=USER, session=session_id, model=MODEL, scope_fingerprint=current_fingerprint)
    values.update(changes)
    return pb.InvalidationConfirmation(**values)


def wire_forms(message: Any) -> list[str]:
    """Every form a response reaches a caller in: bytes, JSON and text."""
    return [
        message.SerializeToString().decode("latin-1"),
        json_format.MessageToJson(message),
        str(message),
    ]
