"""The four compaction modes over gRPC, on SQLite and PostgreSQL.

Manual compaction is CompactSession. Threshold, background and overflow are
started by the Generate flow inside the server; here the same entry points
run on a second service sharing the database (as another replica would),
and every effect is observed through the server's RPCs. Background jobs are
run by the server's own worker.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import event_pb2
from agentctx_common.errors import Code
from context_service.domain.model import CompactionTrigger, SessionKey
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
from tests.support.spans import span_exporter

SMALL_KEEP = policy_pb2.CompactionPolicy(keep_recent_tokens=300)


async def chat(stub, turns: int = 4, size: int = 600) -> None:
    """User asks, the model reads a file, the tool answers, the model replies."""
    for t in range(turns):
        await append(stub, text("user", f"Turn {t}: please check src/mod{t}.py for TICKET-{100 + t}. " + "x" * size))
        await append(stub, call(f"t{t}", "read_file", {"path": f"src/mod{t}.py"}))
        await append(stub, result(f"t{t}", "read_file", {"result": "y" * size}))
        await append(stub, text("model", f"We decided to keep mod{t} as is. " + "z" * (size // 2)))


async def wait_for_compaction(stub, count: int = 1) -> list[event_pb2.Event]:
    for _ in range(400):
        found = [e for e in await events(stub) if e.kind == event_pb2.EVENT_KIND_COMPACTION]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("the background compaction never committed")


# --- manual ----------------------------------------------------------------------


async def test_manual_compaction_over_grpc(rpc):
    await create(rpc.stub, SMALL_KEEP)
    await chat(rpc.stub)
    before = await events(rpc.stub)
    reply = await compact(rpc.stub, instructions="keep every ticket id")
    assert reply.compacted and not reply.kept_over_budget
    c = reply.compaction
    assert c.kind == event_pb2.EVENT_KIND_COMPACTION and c.author == "compactor" and c.sequence == len(before) + 1
    assert c.name == f"{SESSION}/events/{c.id}"
    body = c.compaction
    assert body.start_sequence == 1 and body.first_kept_sequence == body.end_sequence + 1
    assert body.checkpoint.schema_version == 1 and body.checkpoint.compactor == "extractive"
    assert body.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_MANUAL
    assert len(body.checkpoint.source_fingerprint) == 64
    assert reply.kept_events == len(before) - body.end_sequence and 0 < reply.kept_tokens <= 300
    for fact in ("TICKET-100", "src/mod0.py", "read_file"):
        assert fact in body.summary
    # Non-destructive: every source event is still there, unchanged.
    assert (await events(rpc.stub, include_compactions=False)) == before
    # adk-python #4000: the first request after a compaction works.
    built = await build(rpc.stub)
    check_request_shape(list(built.request.contents))
    assert summary_of(built) == body.summary
    assert built.accounting.compaction_sequence == c.sequence
    assert built.accounting.events_seen == reply.kept_events
    # Nothing new to summarize: nothing changes.
    again = await compact(rpc.stub)
    assert not again.compacted and len(await events(rpc.stub)) == len(before) + 1


async def test_manual_compaction_with_a_remote_compactor_and_instructions(rpc, remote_server):
    seen = []

    async def behave(request, context):
        seen.append(request)
        return await answer(f"remote summary of {len(request.events)} events", prompt_tokens=5000)

    remote_server.behavior = behave
    await create(rpc.stub, SMALL_KEEP)
    await chat(rpc.stub, turns=3)
    policy = policy_pb2.CompactionPolicy(compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target)
    reply = await compact(rpc.stub, instructions="keep ids", policy=policy)
    assert reply.compacted and reply.compaction.compaction.summary.startswith("remote summary of")
    assert reply.compaction.compaction.checkpoint.compactor == "remote"
    assert reply.compaction.compaction.summarizer_usage.prompt_tokens == 5000
    assert seen[0].instructions == "keep ids" and seen[0].session == SESSION


async def test_compact_session_validates_its_request(rpc):
    await create(rpc.stub)
    err = await rpc_error(compact(rpc.stub, policy=policy_pb2.CompactionPolicy(keep_recent_tokens=-1)))
    assert err.code is Code.INVALID_ARGUMENT and err.field_violations[0].field == "policy.keep_recent_tokens"
    err = await rpc_error(compact(rpc.stub, policy=policy_pb2.CompactionPolicy(compactor=policy_pb2.COMPACTOR_KIND_REMOTE)))
    assert err.field_violations[0].field == "policy.remote_target"
    err = await rpc_error(compact(rpc.stub, instructions="x" * 20_000))
    assert err.field_violations[0].field == "instructions"
    err = await rpc_error(compact(rpc.stub, name="apps/app1/users/u1/sessions/missing"))
    assert err.code is Code.NOT_FOUND
    err = await rpc_error(compact(rpc.stub, name="not-a-name"))
    assert err.code is Code.INVALID_ARGUMENT


async def test_session_config_rejects_a_policy_that_would_compact_every_turn(rpc):
    err = await rpc_error(create(rpc.stub, policy_pb2.CompactionPolicy(enabled=True, context_window=32_768)))
    assert err.code is Code.INVALID_ARGUMENT
    assert any(v.field.endswith("compaction.keep_recent_tokens") for v in err.field_violations)


# --- threshold -------------------------------------------------------------------------


async def test_threshold_compaction_at_a_turn_boundary(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(
        enabled=True, context_window=3000, reserve_tokens=500, keep_recent_tokens=300,
    ))
    await chat(rpc.stub, turns=1)
    quiet = await rpc.service.maybe_compact_at_turn_boundary(KEY)
    assert not quiet.compacted and quiet.skipped == "NOT_DUE"
    await chat(rpc.stub, turns=4, size=1200)
    outcome = await rpc.service.maybe_compact_at_turn_boundary(KEY)
    assert outcome.compacted and outcome.trigger is CompactionTrigger.THRESHOLD
    built = await build(rpc.stub)
    assert built.accounting.compaction_sequence == outcome.event.sequence
    assert built.accounting.history.tokens < 3000 - 500
    check_request_shape(list(built.request.contents))


async def test_event_count_and_turn_interval_triggers(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(enabled=True, event_threshold=12, keep_recent_tokens=5000))
    await chat(rpc.stub, turns=2, size=10)
    assert (await rpc.service.maybe_compact_at_turn_boundary(KEY)).skipped == "NOT_DUE"
    await chat(rpc.stub, turns=1, size=10)
    outcome = await rpc.service.maybe_compact_at_turn_boundary(KEY)
    assert outcome.compacted and outcome.trigger is CompactionTrigger.EVENT_COUNT
    assert outcome.kept_events <= 6  # well under the threshold: the next turn does not fire again
    assert (await rpc.service.maybe_compact_at_turn_boundary(KEY)).skipped == "NOT_DUE"

    other = "apps/app1/users/u1/sessions/s2"
    await create(rpc.stub, policy_pb2.CompactionPolicy(enabled=True, turn_interval=3, keep_recent_tokens=40), name=other)
    for t in range(3):
        await append(rpc.stub, text("user", f"question {t} " + "q" * 200), name=other)
        await append(rpc.stub, text("model", f"answer {t} " + "a" * 200), name=other)
    outcome = await rpc.service.maybe_compact_at_turn_boundary(SessionKey("app1", "u1", "s2"))
    assert outcome.compacted and outcome.trigger is CompactionTrigger.TURN_INTERVAL


# --- background ------------------------------------------------------------------------


async def test_background_compaction_runs_while_appends_and_builds_go_on(rpc, remote_server):
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(request, context):
        started.set()
        await release.wait()
        return await answer("background summary")

    remote_server.behavior = slow
    await create(rpc.stub, policy_pb2.CompactionPolicy(
        enabled=True, background_tokens=1000, keep_recent_tokens=300, timeout={"seconds": 30},
        compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target,
    ))
    await chat(rpc.stub, turns=4)
    outcome = await rpc.service.maybe_compact_at_turn_boundary(KEY)
    assert outcome.background_scheduled and not outcome.compacted
    again = await rpc.service.maybe_compact_at_turn_boundary(KEY)
    assert again.skipped == "BACKGROUND_PENDING"  # at most one pending job per session
    await asyncio.wait_for(started.wait(), 20)  # the server's worker is summarizing now
    # Meanwhile the session is fully usable.
    late = await append(rpc.stub, text("user", "a message sent while compacting"))
    built = await build(rpc.stub)
    assert built.request.contents[-2].parts[0].text == "a message sent while compacting"
    release.set()
    found = await wait_for_compaction(rpc.stub)
    body = found[0].compaction
    assert body.checkpoint.trigger == event_pb2.COMPACTION_TRIGGER_BACKGROUND and body.summary == "background summary"
    assert body.end_sequence < late.sequence  # the late append is kept verbatim
    after = await build(rpc.stub)
    assert summary_of(after) == "background summary"
    assert any(c.parts[0].text == "a message sent while compacting" for c in after.request.contents)


# --- overflow --------------------------------------------------------------------------


async def test_overflow_compaction_uses_the_tighter_budget(rpc):
    await create(rpc.stub, policy_pb2.CompactionPolicy(enabled=True, keep_recent_tokens=5000, overflow_keep_recent_tokens=300))
    await chat(rpc.stub, turns=4)
    assert not (await compact(rpc.stub)).compacted  # fits the normal keep budget
    outcome = await rpc.service.compact_for_overflow(KEY)
    assert outcome.compacted and outcome.trigger is CompactionTrigger.OVERFLOW
    assert outcome.kept_tokens <= 300 or outcome.kept_over_budget
    assert outcome.event.compaction.checkpoint.trigger is CompactionTrigger.OVERFLOW


@pytest.mark.parametrize("configured", [policy_pb2.CompactionPolicy(enabled=False, keep_recent_tokens=100), None])
async def test_pi_6472_overflow_path_respects_enabled_false(rpc, configured):
    await create(rpc.stub, configured)
    await chat(rpc.stub, turns=4)
    outcome = await rpc.service.compact_for_overflow(KEY)
    assert not outcome.compacted and outcome.skipped == "DISABLED"
    assert (await rpc.service.maybe_compact_at_turn_boundary(KEY)).skipped == "DISABLED"
    assert not [e for e in await events(rpc.stub) if e.kind == event_pb2.EVENT_KIND_COMPACTION]


async def test_compress_overflow_mode_goes_through_the_compactor(rpc):
    await create(rpc.stub)
    await chat(rpc.stub, turns=4)
    full = await build(rpc.stub)
    budget = full.accounting.history.tokens // 2
    reply = await build(rpc.stub, policy=policy_pb2.SelectionPolicy(
        max_tokens=budget, overflow=policy_pb2.OVERFLOW_MODE_COMPRESS,
    ))
    a = reply.accounting
    assert a.compressed and a.units_dropped > 0 and a.history.tokens <= budget
    assert "TICKET-100" in summary_of(reply)  # the extractive compactor kept the dropped facts
    check_request_shape(list(reply.request.contents))
    # BuildContext stays read-only.
    assert not [e for e in await events(rpc.stub) if e.kind == event_pb2.EVENT_KIND_COMPACTION]


async def test_a_failing_compactor_is_recorded_on_the_span_by_reason_only(rpc, remote_server):
    """The remote compactor's own error text never reaches telemetry."""
    exporter = span_exporter()

    async def fail(request, context):
        await context.abort(grpc.StatusCode.INTERNAL, "leaked: the user's password is hunter2")

    remote_server.behavior = fail
    await create(rpc.stub, SMALL_KEEP)
    await chat(rpc.stub, turns=3)
    policy = policy_pb2.CompactionPolicy(compactor=policy_pb2.COMPACTOR_KIND_REMOTE, remote_target=remote_server.target)
    err = await rpc_error(compact(rpc.stub, policy=policy))
    assert err.reason == "COMPACTOR_FAILED"
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "compaction"]
    assert span.attributes["error.reason"] == "COMPACTOR_FAILED" and not span.events
    assert "hunter2" not in repr([(s.attributes, s.events, s.status) for s in exporter.get_finished_spans()])
