"""An agent for turn tests: it runs turns over the ContextService stub,
answers the model's tool calls itself, and checks what it sees."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2, generation_pb2
from agentctx_common.status import error_from_rpc

MODEL = "local-sim-1"
SYSTEM = content_pb2.Content(
    role="user", parts=[content_pb2.Part(text="You are a careful travel assistant. Answer briefly. " * 8)]
)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


TOOLS = [
    generation_pb2.Tool(function_declarations=[
        generation_pb2.FunctionDeclaration(
            name="get_weather", description="Current weather for a city.",
            parameters=_struct({"type": "object", "properties": {"city": {"type": "string"}}}),
        ),
        generation_pb2.FunctionDeclaration(
            name="lookup", description="Looks a fact up.",
            parameters=_struct({"type": "object", "properties": {"q": {"type": "string"}}}),
        ),
    ])
]


def user_text(event_id: str, text: str) -> event_pb2.Event:
    return event_pb2.Event(
        id=event_id, author="user", content=content_pb2.Content(role="user", parts=[content_pb2.Part(text=text)])
    )


def tool_result(event_id: str, calls: Iterable[content_pb2.FunctionCall], response: dict[str, Any]) -> event_pb2.Event:
    """One event answering every call in ``calls`` with ``response``."""
    parts = [
        content_pb2.Part(
            function_response=content_pb2.FunctionResponse(id=c.id, name=c.name, response=_struct(response))
        )
        for c in calls
    ]
    return event_pb2.Event(id=event_id, author="user", content=content_pb2.Content(role="user", parts=parts))


def calls_of(event: event_pb2.Event) -> list[content_pb2.FunctionCall]:
    return [p.function_call for p in event.content.parts if p.HasField("function_call")]


async def create_session(
    stub: Any, *, app: str = "app", user: str = "user-1", cache: bool = True, model: str = MODEL,
    compaction: policy_pb2.CompactionPolicy | None = None, selection: policy_pb2.SelectionPolicy | None = None,
) -> session_pb2.Session:
    config = policy_pb2.ContextConfig(model=model, cache=policy_pb2.CachePolicy(enabled=cache))
    if compaction is not None:
        config.compaction.CopyFrom(compaction)
    if selection is not None:
        config.selection.CopyFrom(selection)
    return await stub.CreateSession(
        pb.CreateSessionRequest(parent=f"apps/{app}/users/{user}", session=session_pb2.Session(config=config))
    )


def pairing_violations(contents: Iterable[content_pb2.Content]) -> list[str]:
    """Tool pairing as a model sees it: every result follows its call, and
    every call before the newest model content has its result."""
    contents = list(contents)
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, c in enumerate(contents):
        for p in c.parts:
            if p.HasField("function_call"):
                calls[p.function_call.id] = i
            elif p.HasField("function_response"):
                if p.function_response.id not in calls:
                    problems.append(f"result {p.function_response.id} at {i} without its call before it")
                answered.add(p.function_response.id)
    last_model = max((i for i, c in enumerate(contents) if c.role == "model"), default=-1)
    for call_id, at in calls.items():
        if call_id not in answered and at != last_model:
            problems.append(f"call {call_id} at {at} without its result")
    return problems


@dataclass
class Agent:
    """Runs turns in one session: a user message, or the results of the
    model's pending tool calls. Event ids are ``{name}-{n}``, so a test can
    repeat a turn exactly."""

    stub: Any
    session: str
    name: str = "agent"
    stream: bool = False
    timeout: float = 20.0
    turns: int = 0
    pending: list[content_pb2.FunctionCall] = field(default_factory=list)
    chunks: list[list[event_pb2.Event]] = field(default_factory=list)
    secret: str = "sk-test-9f8e7d6c5b4a"

    def request(self, text: str = "", **extra: Any) -> pb.GenerateRequest:
        """The next turn's request (tool results first, if any are pending)."""
        event_id = f"{self.name}-{self.turns}"
        if self.pending:
            inputs = [tool_result(event_id, self.pending, {"city": "Paris", "forecast": "sunny", "api_key": self.secret})]
        else:
            inputs = [user_text(event_id, text or f"Tell me something new, turn {self.turns}.")]
        return pb.GenerateRequest(
            session=self.session, input=inputs, system_instruction=SYSTEM, tools=TOOLS, **extra
        )

    async def send(self, request: pb.GenerateRequest) -> pb.GenerateResponse:
        if self.stream:
            chunks: list[event_pb2.Event] = []
            result = None
            async for item in self.stub.StreamGenerate(pb.StreamGenerateRequest(turn=request), timeout=self.timeout):
                if item.HasField("chunk"):
                    assert result is None, "a chunk after the result"
                    chunks.append(item.chunk)
                else:
                    result = item.result
            assert result is not None, "the stream ended without a result"
            self.chunks.append(chunks)
            return result
        return await self.stub.Generate(request, timeout=self.timeout)

    async def turn(self, text: str = "", **extra: Any) -> pb.GenerateResponse:
        response = await self.send(self.request(text, **extra))
        self.turns += 1
        self.pending = calls_of(response.reply)
        return response


def text_of(content: content_pb2.Content) -> str:
    return "".join(p.text for p in content.parts if p.HasField("text"))


def as_json(message: Any) -> str:
    return json_format.MessageToJson(message)


async def until_available(send: Any, request: Any, attempts: int = 100) -> Any:
    """What an agent does with RetryInfo: send the same request again."""
    for _ in range(attempts):
        try:
            return await send(request)
        except grpc.aio.AioRpcError as err:
            if err.code() is not grpc.StatusCode.UNAVAILABLE:
                raise
            await asyncio.sleep(error_from_rpc(err).retry_after or 0.1)
    raise AssertionError("the turn never completed")


async def drain(stream: Any) -> None:
    async for _ in stream:
        pass
