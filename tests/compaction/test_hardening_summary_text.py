"""Any event AppendEvent accepted can be compacted by every compactor
(hardening: one NUL in a tool result made the extractive summary
SUMMARY_MALFORMED, and every later Generate and CompactSession failed).

Summaries keep every character but the control characters other than tab,
LF and CR, which become U+FFFD (context_service.domain.compaction_rules.summary_text).
"""

from __future__ import annotations

import pathlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import content_pb2
from context_service.cache_client import CacheClient
from context_service.compaction.compactors import CompactionCall, run
from context_service.compaction.model_compactor import ModelCompactor
from context_service.domain.compaction_rules.extractive import summarize
from context_service.domain.compaction_rules.policy import resolve
from context_service.domain.compaction_rules.summary import build_request, prepare_for_compactor, validate_summary
from context_service.domain.compaction_rules.summary_text import REPLACEMENT, escape_controls
from context_service.domain.config import CompactionPolicy, CompactorKind
from context_service.domain.model import Content, Event, FunctionCall, FunctionResponse, Part, SessionKey
from tests.compaction.builders import numbered, tool, user
from tests.compaction.rpc_support import append, build, compact, create, summary_of
from tests.compaction.servers import RemoteCompactorServer, answer, start_remote_compactor, start_scripted_cache
from tests.support.pair import ServicePair, pair_maker
from tests.support.servers import context_settings

# Every plane, every control character; no lone surrogates (a proto string
# is UTF-8, so AppendEvent can never receive one).
ANY_TEXT = st.text(st.characters(codec="utf-8"), min_size=1, max_size=60)
CONTROLS = st.text(st.characters(max_codepoint=0x1F) | st.sampled_from("\x7f\x85\u2028\ufeff"), min_size=1, max_size=8)
TEXT = st.one_of(ANY_TEXT, CONTROLS, st.tuples(ANY_TEXT, CONTROLS, ANY_TEXT).map("".join))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40).map(float) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


def test_validation_escapes_control_characters_instead_of_rejecting() -> None:
    assert validate_summary("ok\x00then\x1b[31m red\x7f", 100, "remote") == f"ok{REPLACEMENT}then{REPLACEMENT}[31m red{REPLACEMENT}"
    assert validate_summary("tabs\tand\nlines\r\nstay", 100, "remote") == "tabs\tand\nlines\r\nstay"
    kept = "𝄞 \U0010fffd \u2028 \ufeff é"
    assert validate_summary(kept, 100, "remote") == kept
    assert escape_controls(kept) is kept


def test_a_nul_in_a_tool_result_no_longer_breaks_the_extractive_summary() -> None:
    events = numbered([user("read `a\x00b.py` please"), tool("c1", "read_file", "bin\x00ary\x00 AUTH-7")])
    summary = summarize([prepare_for_compactor(e).event for e in events], "", 4096, 8192)
    assert "\x00" not in summary
    assert validate_summary(summary, 8192, "extractive") == summary.strip()


@st.composite
def events(draw: st.DrawFn) -> list[Event]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["user", "model", "call", "result"]))
        if kind == "user":
            out.append(user(draw(TEXT)))
        elif kind == "model":
            out.append(Event(id="", author="model", content=Content("model", (Part(text=draw(TEXT)),))))
        elif kind == "call":
            args = draw(st.dictionaries(TEXT, JSON, max_size=3))
            out.append(Event(id="", author="model", content=Content("model", (Part(function_call=FunctionCall(f"c{i}", "f", args)),))))
        else:
            response = draw(st.dictionaries(TEXT, JSON, max_size=3))
            out.append(Event(id="", author="user", content=Content("user", (Part(function_response=FunctionResponse(f"c{i}", "f", response)),))))
    return numbered(out)


@settings(max_examples=300, deadline=None)
@given(history=events(), previous=st.one_of(st.just(""), TEXT), limit=st.integers(16, 4096))
def test_the_extractive_summary_of_any_text_always_validates(history: list[Event], previous: str, limit: int) -> None:
    prepared = [p.event for p in map(prepare_for_compactor, history) if p.event is not None]
    summary = summarize(prepared, previous, limit, limit)
    assert validate_summary(summary, limit, "extractive") == summary.strip()
    assert escape_controls(summary) == summary


# --- over gRPC, every compactor -------------------------------------------------


@dataclass
class Services:
    pair: ServicePair
    remote: RemoteCompactorServer


@pytest.fixture
async def services(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Services]:
    remote = await start_remote_compactor()

    async def echo(request: Any, context: Any) -> bytes:
        # Text produced elsewhere: this one quotes the conversation verbatim.
        quoted = [p.text for e in request.events for p in e.content.parts if p.text]
        return await answer("summary\n" + "\n".join(quoted))

    remote.behavior = echo
    async with pair_maker(certs_dir, tmp_path, context_defaults={"remote_compactor_targets": ["*"]}) as make:
        yield Services(await make(), remote)
    await remote.stop()


def _policy(kind: str, remote: RemoteCompactorServer) -> policy_pb2.CompactionPolicy:
    p = policy_pb2.CompactionPolicy(keep_recent_tokens=10, compactor=getattr(policy_pb2, f"COMPACTOR_KIND_{kind}"))
    if kind == "REMOTE":
        p.remote_target = remote.target
    return p


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def _to_proto(e: Event) -> content_pb2.Content:
    assert e.content is not None
    c = content_pb2.Content(role=e.content.role)
    for p in e.content.parts:
        part = c.parts.add()
        if p.text is not None:
            part.text = p.text
        elif p.function_call is not None:
            part.function_call.name, part.function_call.id = p.function_call.name, p.function_call.id
            part.function_call.args.CopyFrom(_struct(p.function_call.args))
        elif p.function_response is not None:
            part.function_response.name, part.function_response.id = p.function_response.name, p.function_response.id
            part.function_response.response.CopyFrom(_struct(p.function_response.response))
    return c


async def _compact_and_build(s: Services, kind: str, history: list[content_pb2.Content]) -> str:
    name = f"apps/app1/users/u1/sessions/{uuid.uuid4().hex}"
    await create(s.pair.stub, _policy(kind, s.remote), name=name)
    for content in [*history, content_pb2.Content(role="model", parts=[content_pb2.Part(text="x" * 400)])]:
        await append(s.pair.stub, content, name=name)
    reply = await compact(s.pair.stub, name)
    assert reply.compacted
    summary = reply.compaction.compaction.summary
    built = await build(s.pair.stub, name)
    assert summary_of(built) == summary
    # And a second compaction folds the first summary in.
    await append(s.pair.stub, content_pb2.Content(role="user", parts=[content_pb2.Part(text="again \x00 " + "y" * 400)]), name=name)
    assert (await compact(s.pair.stub, name)).compacted
    await build(s.pair.stub, name)
    return summary


@pytest.mark.parametrize("kind", ["EXTRACTIVE", "MODEL", "REMOTE"])
async def test_nul_and_escapes_in_events_compact_with_every_compactor(services: Services, kind: str) -> None:
    history = [
        content_pb2.Content(role="user", parts=[content_pb2.Part(text="look at \x00`src/a.py`\x1b[0m")]),
        _to_proto(tool("c1", "read_file", "\x00\x01bytes\x7f")),
    ]
    history[1].parts[0].function_response.id = "c1"
    call = content_pb2.Content(role="model")
    call.parts.add().function_call.CopyFrom(content_pb2.FunctionCall(id="c1", name="read_file", args=_struct({"p\x00": "\x00"})))
    summary = await _compact_and_build(services, kind, [history[0], call, history[1]])
    assert "\x00" not in summary
    # Generate still runs on the compacted session.
    name = f"apps/app1/users/u1/sessions/{uuid.uuid4().hex}"
    await create(services.pair.stub, _policy(kind, services.remote), name=name)
    await append(services.pair.stub, history[0], name=name)
    await append(services.pair.stub, content_pb2.Content(role="model", parts=[content_pb2.Part(text="z" * 400)]), name=name)
    assert (await compact(services.pair.stub, name)).compacted
    turn = pb.GenerateRequest(session=name, model="local-sim-1")
    turn.input.add(author="user", content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="go \x00")]))
    assert (await services.pair.stub.Generate(turn)).reply.content.parts


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=events(), kind=st.sampled_from(["EXTRACTIVE", "MODEL", "REMOTE"]))
async def test_any_accepted_events_compact_and_build(services: Services, history: list[Event], kind: str) -> None:
    contents = [_to_proto(e) for e in history]
    # Results answer calls in any order; orphans are accepted too.
    await _compact_and_build(services, kind, contents)


async def test_a_model_summary_with_nul_is_escaped_not_refused(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    server, port, cache = await start_scripted_cache(certs_dir)
    client = CacheClient(context_settings(certs_dir, tmp_path, cache_target=f"127.0.0.1:{port}"))
    try:
        cache.reply = "## Goal\n- read a\x00b.py\x1b"
        key = SessionKey("app1", "u1", "s1")
        request = build_request(key.name, [prepare_for_compactor(e) for e in numbered([user("hi")])], "", "", 4096, 2048)
        result = await run(ModelCompactor(client), request, CompactionCall(key, "local-sim-1", time.monotonic() + 5),
                           resolve(CompactionPolicy(compactor=CompactorKind.MODEL)))
        assert result.summary == f"## Goal\n- read a{REPLACEMENT}b.py{REPLACEMENT}"
    finally:
        await client.close()
        await server.stop(None)
