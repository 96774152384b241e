"""One regression test per compaction bug the anchors' users hit (pi and
adk-python issue numbers in the names), over gRPC on SQLite and PostgreSQL,
plus misbehaving remote compactors and cancellation."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import event_pb2
from agentctx_common.errors import Code
from agentctx_common.status import error_from_rpc
from tests.compaction.rpc_support import (
    KEY,
    SESSION,
    append,
    build,
    call,
    check_request_shape,
    compact,
    create,
    events,
    result,
    rpc_error,
    summary_of,
    text,
)
from tests.compaction.servers import answer


def compactions(listed: list[event_pb2.Event]) -> list[event_pb2.Event]:
    return [e for e in listed if e.kind == event_pb2.EVENT_KIND_COMPACTION]


def kept_ids(listed: list[event_pb2.Event]) -> list[str]:
    """Ids shown verbatim after the newest compaction."""
    latest = compactions(listed)[-1].compaction
    return [e.id for e in listed if e.kind != event_pb2.EVENT_KIND_COMPACTION and e.sequence >= latest.first_kept_sequence]


async def test_pi_4570_6832_no_orphan_tool_result_after_chained_compactions(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=250))
    for round_ in range(5):
        await append(rpc.stub, text("user", f"round {round_} " + "u" * 300))
        for i in range(3):
            cid = f"r{round_}c{i}"
            await append(rpc.stub, call(cid, "grep"))
            await append(rpc.stub, result(cid, "grep", {"result": "m" * (150 * (i + 1))}))
        reply = await compact(rpc.stub)
        assert reply.compacted
        built = await build(rpc.stub)
        check_request_shape(list(built.request.contents))
        listed = await events(rpc.stub)
        first_kept = compactions(listed)[-1].compaction.first_kept_sequence
        kept = [e for e in listed if e.kind != event_pb2.EVENT_KIND_COMPACTION and e.sequence >= first_kept]
        assert not kept or not kept[0].content.parts[0].HasField("function_response")
    assert len(await events(rpc.stub, include_compactions=False)) == 5 * 7  # nothing lost


async def test_pi_8667_no_stale_compaction_between_a_call_and_its_result(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=200))
    await append(rpc.stub, text("user", "start " + "s" * 2000))
    await append(rpc.stub, text("model", "ok " + "o" * 2000))
    await append(rpc.stub, call("slow1", "build"))  # the tool is running
    first = await compact(rpc.stub)
    assert first.compacted and first.compaction.compaction.first_kept_sequence <= 3  # the waiting call is kept
    await append(rpc.stub, result("slow1", "build", {"result": "built"}))  # answered after the compaction entry
    built = await build(rpc.stub)
    contents = list(built.request.contents)
    check_request_shape(contents)
    kinds = [c.parts[0].WhichOneof("data") for c in contents]
    at = kinds.index("function_call")
    assert kinds[at + 1] == "function_response"  # adjacent: no summary rendered between them
    # A second compaction: only the newest summary is shown, once, first.
    await append(rpc.stub, text("user", "next " + "n" * 2000))
    await append(rpc.stub, text("model", "done " + "d" * 2000))
    second = await compact(rpc.stub)
    assert second.compacted
    built = await build(rpc.stub)
    check_request_shape(list(built.request.contents))
    assert summary_of(built) == second.compaction.compaction.summary


async def test_pi_7201_cut_found_when_trailing_tool_results_exceed_keep_recent(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=500))
    await append(rpc.stub, text("user", "read the log " + "u" * 1000))
    await append(rpc.stub, call("big", "read_log"))
    await append(rpc.stub, result("big", "read_log", {"result": "L" * 20_000}))  # ~5,000 tokens > keep
    reply = await compact(rpc.stub)
    assert reply.compacted and reply.kept_over_budget
    assert reply.kept_events == 2 and reply.kept_tokens > 500  # the call and its result, said so
    assert kept_ids(await events(rpc.stub))[0] == (await events(rpc.stub))[1].id
    check_request_shape(list((await build(rpc.stub)).request.contents))


async def test_pi_8498_kept_tail_stays_within_keep_recent_tokens(rpc):
    """pi's repro: keep 20,000; a 3,000-token user message, a call and an
    18,000-token result: the kept tail must not exceed 20,000."""
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=20_000))
    await append(rpc.stub, text("user", "old " + "o" * 40_000))
    await append(rpc.stub, text("model", "older reply " + "r" * 40_000))
    await append(rpc.stub, text("user", "recent " + "u" * 12_000))  # ~3,000 tokens
    await append(rpc.stub, call("c1", "read_file"))
    await append(rpc.stub, result("c1", "read_file", {"result": "x" * 72_000}))  # ~18,000 tokens
    reply = await compact(rpc.stub)
    assert reply.compacted and not reply.kept_over_budget
    assert reply.kept_tokens <= 20_000 and reply.kept_events == 2


async def test_pi_2911_overlapping_compactions_exactly_one_commits(rpc, remote_server):
    both_started = asyncio.Event()
    started = 0

    async def slow(request, context):
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 10)
        return await answer(f"summary {started}")

    remote_server.behavior = slow
    policy = policy_pb2.CompactionPolicy(
        compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target, keep_recent_tokens=200,
    )
    await create(rpc.stub, policy)
    for i in range(4):
        await append(rpc.stub, text("user", f"q{i} " + "q" * 1000))
        await append(rpc.stub, text("model", f"a{i} " + "a" * 1000))
    results = await asyncio.gather(compact(rpc.stub), compact(rpc.stub), return_exceptions=True)
    ok = [r for r in results if isinstance(r, pb.CompactSessionResponse)]
    failed = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(ok) == 1 and ok[0].compacted and len(failed) == 1
    err = error_from_rpc(failed[0])
    assert err.code is Code.ABORTED and err.reason == "COMPACTION_CONFLICT"
    assert len(compactions(await events(rpc.stub))) == 1


async def test_adk_7236_one_orphan_function_call_does_not_stop_compaction(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=200))
    await append(rpc.stub, text("user", "look it up " + "u" * 1000))
    await append(rpc.stub, call("never-answered", "lookup"))  # the agent moved on without a result
    await append(rpc.stub, text("user", "never mind, do this instead " + "v" * 1000))
    await append(rpc.stub, text("model", "sure " + "w" * 1000))
    for i in range(3):
        await append(rpc.stub, text("user", f"more {i} " + "m" * 600))
    reply = await compact(rpc.stub)
    assert reply.compacted
    assert reply.compaction.compaction.end_sequence >= 2  # the orphan call was summarized away
    check_request_shape(list((await build(rpc.stub)).request.contents))


@pytest.mark.parametrize("kind", ["confirmation", "long_running"])
async def test_adk_4740_5602_6179_pending_calls_are_never_compacted_away(rpc, kind):
    """A pending confirmation (adk-python #4740/#5602) or long-running call
    (#6179) stays verbatim while its answer may still come, and does not
    block compacting what came before it."""
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=200))
    await append(rpc.stub, text("user", "deploy it " + "u" * 2000))
    await append(rpc.stub, text("model", "preparing " + "p" * 2000))
    name = "request_confirmation" if kind == "confirmation" else "long_build"
    pending = await append(rpc.stub, call("wait1", name), long_running_tool_ids=["wait1"])
    # The conversation goes on while the call waits.
    for i in range(4):
        await append(rpc.stub, text("user", f"status? {i} " + "s" * 800))
        await append(rpc.stub, text("model", f"still waiting {i} " + "w" * 800))
    reply = await compact(rpc.stub)
    assert reply.compacted and reply.kept_over_budget
    body = reply.compaction.compaction
    assert body.end_sequence == pending.sequence - 1 and body.first_kept_sequence == pending.sequence
    await append(rpc.stub, result("wait1", name, {"result": "approved"}))
    built = await build(rpc.stub)
    check_request_shape(list(built.request.contents))
    assert any(c.parts[0].HasField("function_call") and c.parts[0].function_call.id == "wait1" for c in built.request.contents)


async def test_adk_summarizer_usage_is_not_the_agents_prompt_size(rpc, remote_server):
    async def costly(request, context):
        return await answer("short summary", prompt_tokens=900_000)

    remote_server.behavior = costly
    await create(rpc.stub, policy_pb2.CompactionPolicy(
        enabled=True, context_window=60_000, keep_recent_tokens=300,
        compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target,
    ))
    for i in range(4):
        await append(rpc.stub, text("user", f"q{i} " + "q" * 1000))
        await append(rpc.stub, text("model", f"a{i} " + "a" * 1000))
    before = (await build(rpc.stub)).accounting
    reply = await compact(rpc.stub)
    assert reply.compaction.compaction.summarizer_usage.prompt_tokens == 900_000  # recorded, apart
    outcome = await rpc.service.maybe_compact_at_turn_boundary(KEY)
    assert outcome.skipped == "NOT_DUE"  # 900,000 "tokens" would exceed any window
    after = (await build(rpc.stub)).accounting
    assert after.bytes_per_token == before.bytes_per_token and not after.calibrated


async def test_adk_4000_first_request_after_compaction_succeeds(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(keep_recent_tokens=100))
    await append(rpc.stub, text("user", "hello " + "h" * 2000))
    await append(rpc.stub, call("c1", "search"))
    await append(rpc.stub, result("c1", "search", {"result": "r" * 2000}))
    reply = await compact(rpc.stub)
    assert reply.compacted
    built = await build(rpc.stub, input=[text("user", "and now?")])
    contents = list(built.request.contents)
    check_request_shape(contents)
    assert contents[-1].parts[0].text == "and now?" and summary_of(built)


# --- misbehaving remote compactors and cancellation ---------------------------------------


async def _slow(request, context):
    await asyncio.sleep(3)
    return await answer("late")


async def _never(request, context):
    await asyncio.Event().wait()
    return b""


async def _huge(request, context):
    return await answer("h" * (request.max_summary_bytes * 3))


async def _malformed(request, context):
    return b"\x0a\xff\xff\xff\xff\xff"


async def _crash(request, context):
    raise RuntimeError("compactor crashed")


async def _empty(request, context):
    return await answer("")


@pytest.mark.parametrize(
    ("behavior", "code", "reason"),
    [
        (_slow, Code.DEADLINE_EXCEEDED, "COMPACTOR_TIMEOUT"),
        (_never, Code.DEADLINE_EXCEEDED, "COMPACTOR_TIMEOUT"),
        (_huge, Code.RESOURCE_EXHAUSTED, "SUMMARY_TOO_LARGE"),
        (_malformed, Code.FAILED_PRECONDITION, "SUMMARY_MALFORMED"),
        (_crash, Code.FAILED_PRECONDITION, "COMPACTOR_FAILED"),
        (_empty, Code.FAILED_PRECONDITION, "SUMMARY_EMPTY"),
    ],
    ids=["slow", "never-answering", "huge-output", "malformed", "crashing", "empty"],
)
async def test_misbehaving_remote_compactor_leaves_the_session_unchanged(rpc, remote_server, behavior, code, reason):
    remote_server.behavior = behavior
    await create(rpc.stub, policy_pb2.CompactionPolicy(
        compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target,
        keep_recent_tokens=200, max_summary_bytes=4096, timeout={"nanos": 300_000_000},
    ))
    for i in range(3):
        await append(rpc.stub, text("user", f"q{i} " + "q" * 1000))
        await append(rpc.stub, text("model", f"a{i} " + "a" * 1000))
    before = await rpc.stub.GetSession(pb.GetSessionRequest(name=SESSION))
    listed = await events(rpc.stub)
    err = await rpc_error(compact(rpc.stub))
    assert (err.code, err.reason) == (code, reason)
    assert "compactor crashed" not in err.message
    assert await events(rpc.stub) == listed
    assert await rpc.stub.GetSession(pb.GetSessionRequest(name=SESSION)) == before


async def test_client_cancellation_stops_the_compactor(rpc, remote_server):
    started = asyncio.Event()

    async def waits(request, context):
        started.set()
        return await _never(request, context)

    remote_server.behavior = waits
    await create(rpc.stub, policy_pb2.CompactionPolicy(
        compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target,
        keep_recent_tokens=200, timeout={"seconds": 60},
    ))
    for i in range(3):
        await append(rpc.stub, text("user", f"q{i} " + "q" * 1000))
    listed = await events(rpc.stub)
    pending = rpc.stub.CompactSession(pb.CompactSessionRequest(session=SESSION))
    await asyncio.wait_for(started.wait(), 10)
    pending.cancel()
    await asyncio.wait_for(remote_server.cancelled.wait(), 10)  # the summarizer call was cancelled too
    assert await events(rpc.stub) == listed
    # The client's deadline travels the same way.
    remote_server.cancelled.clear()
    err = await rpc_error(rpc.stub.CompactSession(pb.CompactSessionRequest(session=SESSION), timeout=0.5))
    assert err.code is Code.DEADLINE_EXCEEDED
    await asyncio.wait_for(remote_server.cancelled.wait(), 10)
    assert await events(rpc.stub) == listed
