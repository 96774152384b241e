"""Proto builders for the cache service's RPC tests."""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.type.v1 import content_pb2, generation_pb2

SYSTEM_TEXT = "You are a careful assistant. " * 12


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def text(role: str, body: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=body)])


def history(turns: int, words: int = 30) -> list[content_pb2.Content]:
    out = []
    for i in range(turns):
        out.append(text("user", f"question {i}: " + "word " * words))
        out.append(text("model", f"answer {i}: " + "reply " * words))
    return out


def tools() -> list[generation_pb2.Tool]:
    return [generation_pb2.Tool(function_declarations=[generation_pb2.FunctionDeclaration(
        name="lookup", description="Looks a thing up.",
        parameters=struct({"type": "object", "properties": {"q": {"type": "string"}}}),
    )])]


def scope(model: str = "local-sim-1", *, provider: str = "", app: str = "app", user: str = "user-1",
          policy: dict[str, Any] | None = None) -> pb.CacheScope:
    return pb.CacheScope(provider=provider, app=app, user=user, model=model, policy=struct(policy or {}))


def prefix(turns: int, words: int = 30) -> pb.CachePrefix:
    return pb.CachePrefix(system_instruction=text("", SYSTEM_TEXT), tools=tools(), history=history(turns, words))


def acquire(turns: int, *, model: str = "local-sim-1", ttl_s: int | None = None, **scope_kw: Any) -> pb.AcquireLeaseRequest:
    request = pb.AcquireLeaseRequest(scope=scope(model, **scope_kw), prefix=prefix(turns))
    if ttl_s is not None:
        request.ttl.FromSeconds(ttl_s)
    return request


def model_request(turns: int, question: str = "and now?", model: str = "local-sim-1",
                  system: str = SYSTEM_TEXT) -> generation_pb2.ModelRequest:
    return generation_pb2.ModelRequest(
        model=model, system_instruction=text("", system), tools=tools(),
        contents=[*history(turns), text("user", question)],
    )


def generate(turns: int, lease: str = "", *, question: str = "and now?", model: str = "local-sim-1",
             **scope_kw: Any) -> pb.GenerateContentRequest:
    return pb.GenerateContentRequest(scope=scope(model, **scope_kw), request=model_request(turns, question, model),
                                     lease=lease)
