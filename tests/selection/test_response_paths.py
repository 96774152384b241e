"""The RPC's pre-serialized response and the message ``build_context``
returns are the same message, for every shape of request."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import content_pb2, generation_pb2
from context_service.api.selection_rpcs import _build, build_context
from context_service.app import ContextApp
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, SessionKey
from context_service.storage.sql_store import open_store
from tests.selection.builders import call, compaction, response, text
from tests.support.servers import context_settings

KEY = SessionKey("app", "u", "s")


@pytest.fixture
async def app(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ContextApp]:
    settings = context_settings(certs_dir, tmp_path)
    store = await open_store(settings.resolved_database_url, create_if_empty=True)
    app = ContextApp(settings=settings, store=store)
    await store.create_session(KEY, state={}, config=ContextConfig())
    contents = [
        text("user", "hello"), call(("c1", "f", {"q": 1, "token": "t"})), response(("c1", "f", {"ok": True})),
        text("model", "done"), text("user", "again"), call(("c2", "f", {"n": [1, 2]})),
    ]
    for i, c in enumerate(contents):
        await store.append_event(KEY, Event(id=f"e{i}", author="a", content=c))
    c = compaction(0, "earlier talk", first_kept=3)
    await store.append_event(KEY, Event(id="cmp", author="compactor", kind=c.kind, compaction=c.compaction))
    yield app
    await app.history.close()
    await store.close()


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
async def test_wire_and_message_paths_agree(app: ContextApp, request_index: int) -> None:
    request = REQUESTS[request_index]
    head = await app.history.head(app.sessions, KEY)
    built = await _build(app, head, request, None)
    message = built.message()
    assert pb.BuildContextResponse.FromString(built.wire()) == message
    assert await build_context(app, head, request) == message
    # Each shape exercises the summary or the truncated (suffix) layout.
    assert message.accounting.compaction_sequence == 7 or message.accounting.units_dropped > 0


async def test_compress_without_a_compactor_is_unimplemented(app: ContextApp) -> None:
    from agentctx_common.errors import Unimplemented

    head = await app.history.head(app.sessions, KEY)
    policy = policy_pb2.SelectionPolicy(max_bytes=200, overflow=policy_pb2.OVERFLOW_MODE_COMPRESS)
    with pytest.raises(Unimplemented) as info:
        await build_context(app, head, pb.BuildContextRequest(input=[_text("user", "now")], policy=policy))
    assert info.value.reason == "COMPRESS_NOT_AVAILABLE"
