"""BuildContext over gRPC on a real server (mTLS, SQLite in tmp_path)."""

from __future__ import annotations

import hashlib
import math

import grpc
import pytest
from google.protobuf import field_mask_pb2, json_format

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2
from agentctx.type.v1 import content_pb2, event_pb2, generation_pb2
from agentctx_common import canonical
from agentctx_common.errors import AgentCtxError
from agentctx_common.status import error_from_rpc
from context_service.domain.model import Event, SessionKey
from context_service.storage.sql_store import open_store
from tests.selection.builders import compaction
from tests.selection.conftest import APP, Context

SESSION = f"apps/{APP}/users/u1/sessions/s1"
SECRET = "sk-live-1234567890"


def text(role: str, value: str) -> content_pb2.Content:
    return content_pb2.Content(role=role, parts=[content_pb2.Part(text=value)])


def call(call_id: str, args: dict) -> content_pb2.Content:
    c = content_pb2.Content(role="model")
    p = c.parts.add()
    p.function_call.id, p.function_call.name = call_id, "lookup"
    p.function_call.args.update(args)
    return c


def result(call_id: str, response: dict) -> content_pb2.Content:
    c = content_pb2.Content(role="user")
    p = c.parts.add()
    p.function_response.id, p.function_response.name = call_id, "lookup"
    p.function_response.response.update(response)
    return c


async def create(ctx: Context, name: str = SESSION, selection: policy_pb2.SelectionPolicy | None = None) -> None:
    parent, _, session_id = name.rpartition("/sessions/")
    session = session_pb2.Session()
    if selection is not None:
        session.config.selection.CopyFrom(selection)
    await ctx.stub.CreateSession(pb.CreateSessionRequest(parent=parent, session_id=session_id, session=session))


async def append(ctx: Context, content: content_pb2.Content, name: str = SESSION, **fields) -> event_pb2.Event:  # type: ignore[no-untyped-def]
    event = event_pb2.Event(author=fields.pop("author", "user" if content.role == "user" else "agent"), content=content, **fields)
    reply = await ctx.stub.AppendEvent(pb.AppendEventRequest(parent=name, event=event))
    return reply.event


async def conversation(ctx: Context) -> None:
    await create(ctx)
    await append(ctx, text("user", "find the invoice"))
    await append(ctx, call("c1", {"query": "invoice", "api_key": SECRET, "opts": {"Authorization": SECRET}}))
    await append(ctx, result("c1", {"rows": [{"id": 7, "password": SECRET}], "count": 1}))
    await append(ctx, text("model", "Invoice 7 is ready."))


async def build(ctx: Context, **fields) -> pb.BuildContextResponse:  # type: ignore[no-untyped-def]
    fields.setdefault("session", SESSION)
    fields.setdefault("input", [text("user", "and the next one?")])
    return await ctx.stub.BuildContext(pb.BuildContextRequest(**fields))


async def failure(ctx: Context, **fields) -> AgentCtxError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await build(ctx, **fields)
    return error_from_rpc(info.value)


def all_text(reply: pb.BuildContextResponse) -> str:
    return json_format.MessageToJson(reply.request)


async def test_builds_the_full_request_pruned_and_accounted(ctx: Context) -> None:
    await conversation(ctx)
    tool = generation_pb2.Tool(function_declarations=[generation_pb2.FunctionDeclaration(name="lookup", description="d")])
    tool.function_declarations[0].parameters.update({"type": "object", "properties": {"password": {"type": "string"}}})
    reply = await build(
        ctx,
        system_instruction=text("user", "Be brief."),
        tools=[tool],
        tool_config=generation_pb2.ToolConfig(mode=generation_pb2.FUNCTION_CALLING_MODE_AUTO),
        generation_config=generation_pb2.GenerationConfig(temperature=0.3),
        memory=[text("user", "User prefers PDF.")],
        model="gemini-test",
    )
    req, a = reply.request, reply.accounting
    assert req.model == "gemini-test"
    assert [c.parts[0].WhichOneof("data") for c in req.contents] == ["text", "function_call", "function_response", "text", "text", "text"]
    # The memory goes after the history, right before the current input.
    assert req.contents[-2].parts[0].text == "User prefers PDF." and req.contents[-1].parts[0].text == "and the next one?"
    assert SECRET not in all_text(reply)
    assert dict(req.contents[1].parts[0].function_call.args) == {"query": "invoice", "opts": {}}
    assert req.tools[0] == tool  # declarations are schemas: sent as given
    assert (a.events_seen, a.events_selected, a.units_selected, a.units_dropped, a.secrets_pruned) == (4, 4, 3, 0, 3)
    sections = [a.instructions, a.settings, a.history, a.memory, a.input, a.tools, a.framing]
    assert a.request.bytes == sum(s.bytes for s in sections) and a.framing.bytes == 64 * (6 + 1 + 1) + 256
    assert a.bytes_per_token == 4.0 and not a.calibrated and a.last_sequence == 4
    # The prefix fingerprint is what the cache service computes for this
    # request: every content before the memory and the input.
    prefix = canonical.prefix_json(req.model, req.system_instruction, req.tools, req.tool_config, req.contents[:-2])
    assert a.prefix_fingerprint == canonical.fingerprint(prefix)
    envelope = {
        "contents": [canonical.content_json(c) for c in req.contents],
        "generationConfig": json_format.MessageToDict(req.generation_config),
        "model": req.model,
        "systemInstruction": canonical.content_json(req.system_instruction),
        "toolConfig": canonical.tool_config_json(req.tool_config),
        "tools": [canonical.tool_json(t) for t in req.tools],
    }
    assert a.envelope_fingerprint == canonical.fingerprint(envelope)
    digests = b"".join(hashlib.sha256(canonical.canonical_json(canonical.content_json(c))).digest() for c in req.contents[:-2])
    assert a.selection_fingerprint == hashlib.sha256(digests).hexdigest()
    again = await build(
        ctx, system_instruction=text("user", "Be brief."), tools=[tool],
        tool_config=generation_pb2.ToolConfig(mode=generation_pb2.FUNCTION_CALLING_MODE_AUTO),
        generation_config=generation_pb2.GenerationConfig(temperature=0.3),
        memory=[text("user", "User prefers PDF.")], model="gemini-test",
    )
    assert again == reply


async def test_budgets_and_overflow_modes(ctx: Context) -> None:
    await conversation(ctx)
    full = (await build(ctx)).accounting
    budget = full.history.bytes + full.input.bytes - 1
    truncated = await build(ctx, policy=policy_pb2.SelectionPolicy(max_bytes=budget, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE))
    a = truncated.accounting
    assert a.units_dropped == 1 and a.events_selected == 3 and a.history.bytes + a.input.bytes <= budget

    err = await failure(ctx, policy=policy_pb2.SelectionPolicy(max_bytes=budget))
    assert err.code.value == "RESOURCE_EXHAUSTED" and err.reason == "CONTEXT_BUDGET_EXCEEDED"
    assert err.metadata["allowed_bytes"] == str(budget)
    assert err.metadata["measured_bytes"] == str(full.history.bytes + full.input.bytes)

    err = await failure(ctx, policy=policy_pb2.SelectionPolicy(max_request_tokens=full.request.tokens - 1))
    assert err.reason == "REQUEST_CONTEXT_BUDGET_EXCEEDED"
    assert err.metadata["measured_tokens"] == str(full.request.tokens)
    assert err.metadata["allowed_tokens"] == str(full.request.tokens - 1)

    err = await failure(ctx, policy=policy_pb2.SelectionPolicy(max_tokens=2, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE))
    assert err.reason == "CURRENT_INPUT_EXCEEDS_BUDGET"


async def test_compress_summarizes_what_does_not_fit_within_the_budget(ctx: Context) -> None:
    await conversation(ctx)
    for i in range(12):
        await append(ctx, text("user", f"more detail number {i} " * 5))
    full = (await build(ctx)).accounting
    budget = (full.history.bytes + full.input.bytes) // 2
    policy = policy_pb2.SelectionPolicy(max_bytes=budget, overflow=policy_pb2.OVERFLOW_MODE_COMPRESS)
    reply = await build(ctx, policy=policy)
    a = reply.accounting
    assert a.compressed and a.units_dropped > 0 and a.history.bytes + a.input.bytes <= budget
    assert reply.request.contents[0].parts[0].text.startswith("Summary of the earlier conversation:")


async def test_filters_partial_events_and_branches(ctx: Context) -> None:
    await create(ctx)
    await append(ctx, text("user", "root question"), branch="root")
    await append(ctx, text("model", "streamed chunk"), partial=True, branch="root")
    await append(ctx, text("model", "helper work"), author="helper", branch="root.helper")
    await append(ctx, text("model", "other branch"), author="other", branch="side")
    reply = await build(ctx)
    assert [c.parts[0].text for c in reply.request.contents[:-1]] == ["root question", "helper work", "other branch"]
    assert reply.accounting.events_filtered == 1
    f = policy_pb2.EventFilter(branch="root.helper", include_partial=True)
    reply = await build(ctx, policy=policy_pb2.SelectionPolicy(filter=f))
    assert [c.parts[0].text for c in reply.request.contents[:-1]] == ["root question", "streamed chunk", "helper work"]
    f = policy_pb2.EventFilter(exclude_authors=["helper"], content_types=[policy_pb2.CONTENT_TYPE_TEXT])
    reply = await build(ctx, policy=policy_pb2.SelectionPolicy(filter=f))
    assert [c.parts[0].text for c in reply.request.contents[:-1]] == ["root question", "other branch"]


async def test_session_policy_applies_and_a_call_overrides_it(ctx: Context) -> None:
    await create(ctx, selection=policy_pb2.SelectionPolicy(max_bytes=10, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE))
    await append(ctx, text("user", "x" * 200))
    err = await failure(ctx)
    assert err.reason == "CURRENT_INPUT_EXCEEDS_BUDGET" and err.metadata["allowed_bytes"] == "10"
    reply = await build(ctx, policy=policy_pb2.SelectionPolicy(max_bytes=10_000))
    assert reply.accounting.events_selected == 1
    session = session_pb2.Session(name=SESSION)
    session.config.selection.max_bytes = -5
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ctx.stub.UpdateSession(pb.UpdateSessionRequest(session=session, update_mask=field_mask_pb2.FieldMask(paths=["config.selection"])))
    err = error_from_rpc(info.value)
    assert err.code.value == "INVALID_ARGUMENT"
    assert any(v.field.endswith("selection.max_bytes") for v in err.field_violations)


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (policy_pb2.SelectionPolicy(max_bytes=-1), "policy.max_bytes"),
        (policy_pb2.SelectionPolicy(max_tokens=0), "policy.max_tokens"),
        (policy_pb2.SelectionPolicy(bytes_per_token=math.nan), "policy.bytes_per_token"),
        # Found by tests/e2e/test_fuzzed_requests.py: 1e300 spun the byte
        # allowance loop for minutes on the event loop.
        (policy_pb2.SelectionPolicy(bytes_per_token=1e300, max_tokens=100), "policy.bytes_per_token"),
        (policy_pb2.SelectionPolicy(bytes_per_token=0.01), "policy.bytes_per_token"),
        (policy_pb2.SelectionPolicy(max_tokens=2**62, max_request_tokens=2**62), "policy.max_tokens"),
        (policy_pb2.SelectionPolicy(max_request_bytes=2**62), "policy.max_request_bytes"),
        (policy_pb2.SelectionPolicy(max_bytes=100, max_request_bytes=50), "policy.max_bytes"),
        (policy_pb2.SelectionPolicy(filter=policy_pb2.EventFilter(authors=["a"], exclude_authors=["a"])), "policy.filter.exclude_authors"),
        (policy_pb2.SelectionPolicy(filter=policy_pb2.EventFilter(content_types=[0])), "policy.filter.content_types[0]"),
        (policy_pb2.SelectionPolicy(overflow=42), "policy.overflow"),  # type: ignore[arg-type]
        (policy_pb2.SelectionPolicy.FromString(policy_pb2.SelectionPolicy(max_bytes=9).SerializeToString() + b"\xf8\x06\x01"), "policy"),
    ],
)
async def test_bad_policies_are_invalid_argument_with_field_violations(ctx: Context, policy, field: str) -> None:  # type: ignore[no-untyped-def]
    await conversation(ctx)
    err = await failure(ctx, policy=policy)
    assert err.code.value == "INVALID_ARGUMENT"
    assert field in [v.field for v in err.field_violations], err.field_violations


async def test_bad_input_and_access_errors(ctx: Context) -> None:
    await conversation(ctx)
    err = await failure(ctx, input=[content_pb2.Content(role="system", parts=[content_pb2.Part(text="x")])])
    assert err.code.value == "INVALID_ARGUMENT" and "input[0].role" in [v.field for v in err.field_violations]
    err = await failure(ctx, session=f"apps/{APP}/users/u1/sessions/missing")
    assert err.code.value == "NOT_FOUND"
    err = await failure(ctx, session="apps/other/users/u1/sessions/s1")
    assert err.code.value == "PERMISSION_DENIED"
    err = await failure(ctx, session="not-a-name")
    assert err.code.value == "INVALID_ARGUMENT"


async def test_a_call_answered_by_the_input_stays_with_it(ctx: Context) -> None:
    await create(ctx)
    await append(ctx, text("user", "long question " * 30))
    await append(ctx, call("c9", {"q": 1}))
    reply = await build(
        ctx,
        input=[result("c9", {"ok": True})],
        policy=policy_pb2.SelectionPolicy(max_bytes=300, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE),
    )
    kinds = [c.parts[0].WhichOneof("data") for c in reply.request.contents]
    assert kinds == ["function_call", "function_response"]


async def test_compacted_history_is_the_latest_summary_then_the_kept_events(ctx: Context) -> None:
    await create(ctx)
    for i in range(1, 7):
        await append(ctx, text("user" if i % 2 else "model", f"turn {i}"))
    key = SessionKey(APP, "u1", "s1")
    store = await open_store(ctx.db_url)
    try:
        for seq, summary, first_kept in ((7, "first summary", 3), (8, "second summary", 5)):
            c = compaction(seq, summary, first_kept=first_kept)
            await store.append_event(key, Event(id=f"c{seq}", author="compactor", kind=c.kind, compaction=c.compaction))
    finally:
        await store.close()
    await append(ctx, text("user", "turn 9"))
    reply = await build(ctx)
    texts = [c.parts[0].text for c in reply.request.contents]
    assert texts == ["Summary of the earlier conversation:\nsecond summary", "turn 5", "turn 6", "turn 9", "and the next one?"]
    assert reply.request.contents[0].role == "user"
    assert reply.accounting.compaction_sequence == 8 and reply.accounting.events_seen == 3


async def test_the_history_cache_follows_appends_deletes_and_recreation(ctx: Context) -> None:
    await create(ctx)
    await append(ctx, text("user", "one"))
    assert [c.parts[0].text for c in (await build(ctx)).request.contents] == ["one", "and the next one?"]
    await append(ctx, text("model", "two"))
    assert [c.parts[0].text for c in (await build(ctx)).request.contents] == ["one", "two", "and the next one?"]
    await ctx.stub.DeleteSession(pb.DeleteSessionRequest(name=SESSION))
    err = await failure(ctx)
    assert err.code.value == "NOT_FOUND"
    await create(ctx)
    await append(ctx, text("user", "fresh"))
    await append(ctx, text("model", "start"))
    assert [c.parts[0].text for c in (await build(ctx)).request.contents] == ["fresh", "start", "and the next one?"]


async def test_token_estimate_is_calibrated_by_real_prompt_counts(ctx: Context) -> None:
    await create(ctx)
    prompt = 500
    for _i in range(4):
        await append(ctx, text("user", "question " * 20))
        prompt += 60
        reply_event = event_pb2.Event(author="agent", content=text("model", "answer " * 10))
        reply_event.usage.prompt_tokens = prompt
        await ctx.stub.AppendEvent(pb.AppendEventRequest(parent=SESSION, event=reply_event))
    a = (await build(ctx)).accounting
    assert a.calibrated and a.bytes_per_token != 4.0
    assert a.request.tokens == math.ceil(a.request.bytes / a.bytes_per_token)
    off = (await build(ctx, policy=policy_pb2.SelectionPolicy(disable_calibration=True))).accounting
    assert not off.calibrated and off.bytes_per_token == 4.0


async def test_a_context_larger_than_a_response_may_be_is_a_clear_error(certs_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from agentctx.context.v1 import context_service_pb2_grpc
    from agentctx_common.certs import SAMPLE_AGENT_ID
    from tests.support.servers import context_settings, secure_channel, start_context

    settings = context_settings(
        certs_dir, tmp_path, require_client_cert=True, app_grants={SAMPLE_AGENT_ID: [APP]},
        dev_anonymous_apps=[], max_message_bytes=4096,
    )
    server = await start_context(settings)
    channel = secure_channel(server.port, certs_dir)
    try:
        small = Context(context_service_pb2_grpc.ContextServiceStub(channel), server, settings, certs_dir)
        await create(small)
        for i in range(6):
            await append(small, text("user", f"{i} " + "long text " * 120))
        err = await failure(small)
        assert err.code.value == "RESOURCE_EXHAUSTED" and err.reason == "RESPONSE_TOO_LARGE"
        assert int(err.metadata["response_bytes"]) > 4096 and err.metadata["max_message_bytes"] == "4096"
        reply = await build(small, policy=policy_pb2.SelectionPolicy(max_bytes=2000, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE))
        assert reply.accounting.units_dropped >= 4
    finally:
        await channel.close()
        await server.stop(None)
