"""The RPC's pre-serialized response (``response_wire``) and the message
(``response_message``, what a turn sends) are the same message, for every
shape of request."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import content_pb2, generation_pb2
from context_service.app import limits_of
from context_service.building.builder import ContextBuilder
from context_service.building.history import HistoryCache
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, SessionKey
from context_service.mapping.build_context import RequestMapper, model_request, response_message, response_wire
from context_service.mapping.wire import render
from context_service.storage.factory import open_backend
from tests.selection.builders import call, compaction, response, text
from tests.support.servers import context_settings

KEY = SessionKey("app", "u", "s")


@pytest.fixture
async def builder(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ContextBuilder]:
    settings = context_settings(certs_dir, tmp_path)
    backend = await open_backend(settings)
    store = backend.sessions
    await store.create_session(KEY, state={}, config=ContextConfig())
    contents = [
        text("user", "hello"), call(("c1", "f", {"q": 1, "token": "t"})), response(("c1", "f", {"ok": True})),
        text("model", "done"), text("user", "again"), call(("c2", "f", {"n": [1, 2]})),
    ]
    for i, c in enumerate(contents):
        await store.append_event(KEY, Event(id=f"e{i}", author="a", content=c))
    c = compaction(0, "earlier talk", first_kept=3)
    await store.append_event(KEY, Event(id="cmp", author="compactor", kind=c.kind, compaction=c.compaction))
    yield ContextBuilder(
        heads=backend.heads, history=HistoryCache(store, render), render=render, limits=limits_of(settings),
        effective_config=lambda c: c,
    )
    await backend.close()


def _text(role: str, value: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=value)])


def _answer() -> content_pb2.Content:
    c = content_pb2.Content(role="user")
    p = c.parts.add()
    p.function_response.id, p.function_response.name = "c2", "f"
    p.function_response.response.update({"r": 1, "password": "x"})
    return c


REQUESTS = [
    pb.BuildContextRequest(input=[_text("user", "now")]),
    pb.BuildContextRequest(),
    pb.BuildContextRequest(
        input=[_answer()],
        memory=[_text("user", "fact")],
        system_instruction=_text("user", "Be brief."),
        tools=[generation_pb2.Tool(function_declarations=[generation_pb2.FunctionDeclaration(name="f")])],
        tool_config=generation_pb2.ToolConfig(mode=generation_pb2.FUNCTION_CALLING_MODE_ANY),
        generation_config=generation_pb2.GenerationConfig(temperature=0.1, seed=7),
        model="m-x",
    ),
    pb.BuildContextRequest(
        input=[_text("user", "now")],
        policy=policy_pb2.SelectionPolicy(max_bytes=150, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE),
    ),
]


@pytest.mark.parametrize("request_index", range(len(REQUESTS)))
async def test_wire_and_message_paths_agree(builder: ContextBuilder, request_index: int) -> None:
    request = REQUESTS[request_index]
    head = await builder.head(KEY)
    built = await builder.build(head, RequestMapper().build_request(request))
    message = response_message(built)
    assert pb.BuildContextResponse.FromString(response_wire(built)) == message
    assert model_request(built) == message.request
    # Each shape exercises the summary or the truncated (suffix) layout.
    assert message.accounting.compaction_sequence == 7 or message.accounting.units_dropped > 0


async def test_compress_without_a_compactor_is_unimplemented(builder: ContextBuilder) -> None:
    from agentctx_common.errors import Unimplemented

    head = await builder.head(KEY)
    policy = policy_pb2.SelectionPolicy(max_bytes=200, overflow=policy_pb2.OVERFLOW_MODE_COMPRESS)
    request = RequestMapper().build_request(pb.BuildContextRequest(input=[_text("user", "now")], policy=policy))
    with pytest.raises(Unimplemented) as info:
        await builder.build(head, request)
    assert info.value.reason == "COMPRESS_NOT_AVAILABLE"
