"""Compactor runners: the extractive compactor in process, a user's
CompactorService over real gRPC (misbehaving in every way the issue names),
and the model compactor through a CacheService over mTLS."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from agentctx_common.errors import AgentCtxError, Code
from context_service.cache_client import CacheClient
from context_service.compaction.compactors import CompactionCall, ExtractiveCompactor, run
from context_service.compaction.model_compactor import ModelCompactor
from context_service.compaction.remote import RemoteCompactor
from context_service.domain.compaction_rules.policy import resolve
from context_service.domain.compaction_rules.summary import build_request, prepare_for_compactor
from context_service.domain.config import CompactionPolicy, CompactorKind
from context_service.domain.model import SessionKey
from tests.compaction.builders import model, numbered, tool, user
from tests.compaction.servers import answer, start_remote_compactor, start_scripted_cache
from tests.support.servers import context_settings

KEY = SessionKey("app1", "u1", "s1")


def make_request(max_summary_bytes: int = 1024 * 1024, previous: str = "", instructions: str = ""):
    events = numbered([
        user("Bitte repariere den Login-Fehler in src/auth/login.py (Ticket AUTH-77)."),
        model("Ich lese die Datei.", [("c1", "read_file")]),
        tool("c1", "read_file", "def login(): pass " * 300),
        model("Wir haben entschieden, `refresh_session` zu verwenden."),
    ])
    return build_request(KEY.name, [prepare_for_compactor(e) for e in events], previous, instructions, max_summary_bytes, 4096)


def call(timeout: float = 5.0, model_name: str = "local-sim-1") -> CompactionCall:
    return CompactionCall(KEY, model_name, time.monotonic() + timeout)


def policy(**kw):
    return resolve(CompactionPolicy(**kw))


def reason(exc_info) -> str:
    assert isinstance(exc_info.value, AgentCtxError)
    return exc_info.value.reason


# --- extractive ----------------------------------------------------------------


async def test_extractive_is_deterministic_and_keeps_facts():
    first = await run(ExtractiveCompactor(), make_request(), call(), policy())
    second = await run(ExtractiveCompactor(), make_request(), call(), policy())
    assert first.summary == second.summary
    for fact in ("src/auth/login.py", "AUTH-77", "refresh_session", "read_file", "Login-Fehler"):
        assert fact in first.summary
    assert first.usage is None  # no model, no usage


async def test_extractive_folds_the_previous_summary():
    first = await run(ExtractiveCompactor(), make_request(), call(), policy())
    later = build_request(KEY.name, [prepare_for_compactor(e) for e in numbered([user("Now also update docs/README.md")], 10)],
                          first.summary, "", 1 << 20, 4096)
    folded = await run(ExtractiveCompactor(), later, call(), policy())
    for fact in ("src/auth/login.py", "AUTH-77", "read_file ×1", "docs/README.md"):
        assert fact in folded.summary


async def test_extractive_respects_the_byte_bounds():
    result = await run(ExtractiveCompactor(), make_request(max_summary_bytes=200), call(), policy())
    assert 0 < len(result.summary.encode()) <= 200


# --- remote: a user's CompactorService ----------------------------------------


@pytest.fixture
async def remote():
    server = await start_remote_compactor()
    yield server
    await server.stop()


@pytest.fixture
async def remote_compactor(tmp_path, certs_dir):
    compactor = RemoteCompactor(context_settings(certs_dir, tmp_path, remote_compactor_targets=["*"]))
    yield compactor
    await compactor.close()


def remote_policy(server, **kw):
    return policy(compactor=CompactorKind.REMOTE, remote_target=server.target, **kw)


async def test_remote_summarizes_pruned_events_and_reports_usage(remote, remote_compactor):
    async def behave(request, context):
        return await answer(f"{len(request.events)} events about {request.events[0].content.parts[0].text[:6]}", 99)

    remote.behavior = behave
    result = await run(remote_compactor, make_request(instructions="keep paths"), call(), remote_policy(remote))
    assert result.summary.startswith("4 events about Bitte")
    assert result.usage is not None and result.usage.prompt_tokens == 99
    sent = remote.requests[0]
    assert sent.session == KEY.name and sent.instructions == "keep paths" and sent.max_summary_bytes == 1 << 20
    assert sent.events[0].name == f"{KEY.name}/events/e1"
    clipped = sent.events[2].content.parts[0].function_response.response["result"]
    assert "characters clipped" in clipped  # long tool results are clipped for summarizers


async def test_remote_slow_compactor_times_out(remote, remote_compactor):
    async def slow(request, context):
        await asyncio.sleep(5)
        return await answer("late")

    remote.behavior = slow
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), remote_policy(remote, timeout_s=0.3))
    assert reason(exc) == "COMPACTOR_TIMEOUT" and exc.value.code is Code.DEADLINE_EXCEEDED


async def test_remote_never_answering_compactor_times_out(remote, remote_compactor):
    async def never(request, context):
        await asyncio.Event().wait()
        return b""

    remote.behavior = never
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), remote_policy(remote, timeout_s=0.3))
    assert reason(exc) == "COMPACTOR_TIMEOUT"
    await asyncio.wait_for(remote.cancelled.wait(), 5)  # the server saw the call end


async def test_remote_huge_output_is_refused(remote, remote_compactor):
    async def huge(request, context):
        return await answer("x" * (request.max_summary_bytes * 4))

    remote.behavior = huge
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(max_summary_bytes=10_000), call(), remote_policy(remote))
    assert reason(exc) == "SUMMARY_TOO_LARGE" and exc.value.code is Code.RESOURCE_EXHAUSTED


async def test_remote_summary_just_over_the_limit_is_refused(remote, remote_compactor):
    async def over(request, context):
        return await answer("y" * (request.max_summary_bytes + 1))

    remote.behavior = over
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(max_summary_bytes=10_000), call(), remote_policy(remote))
    assert reason(exc) == "SUMMARY_TOO_LARGE"


async def test_remote_malformed_response_is_refused(remote, remote_compactor):
    async def garbage(request, context):
        return b"\xff\xff\xff\xff\x0f"

    remote.behavior = garbage
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), remote_policy(remote))
    assert reason(exc) == "SUMMARY_MALFORMED"


async def test_remote_empty_summary_is_refused(remote, remote_compactor):
    async def empty(request, context):
        return await answer("   \n")

    remote.behavior = empty
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), remote_policy(remote))
    assert reason(exc) == "SUMMARY_EMPTY"


async def test_remote_crashing_compactor_is_a_structured_error(remote, remote_compactor):
    async def crash(request, context):
        raise RuntimeError("boom")

    remote.behavior = crash
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), remote_policy(remote))
    assert reason(exc) == "COMPACTOR_FAILED" and exc.value.metadata["compactor_code"] == "UNKNOWN"
    assert "boom" not in exc.value.message


async def test_remote_unreachable_compactor_is_unavailable(remote, remote_compactor):
    target = remote.target
    await remote.stop()
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), policy(compactor=CompactorKind.REMOTE, remote_target=target))
    assert reason(exc) == "COMPACTOR_UNAVAILABLE" and exc.value.retry_after


async def test_remote_target_must_be_allowed(remote, tmp_path, certs_dir):
    compactor = RemoteCompactor(context_settings(certs_dir, tmp_path, remote_compactor_targets=["10.0.0.1:1"]))
    with pytest.raises(AgentCtxError) as exc:
        await run(compactor, make_request(), call(), remote_policy(remote))
    assert reason(exc) == "COMPACTOR_NOT_ALLOWED" and not remote.requests
    await compactor.close()


async def test_remote_input_bound(remote, remote_compactor):
    with pytest.raises(AgentCtxError) as exc:
        await run(remote_compactor, make_request(), call(), remote_policy(remote, max_input_bytes=100))
    assert reason(exc) == "COMPACTOR_INPUT_TOO_LARGE" and not remote.requests


async def test_cancelling_the_caller_cancels_the_remote_call(remote, remote_compactor):
    started = asyncio.Event()

    async def never(request, context):
        started.set()
        await asyncio.Event().wait()
        return b""

    remote.behavior = never
    task = asyncio.create_task(run(remote_compactor, make_request(), call(), remote_policy(remote, timeout_s=30)))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(remote.cancelled.wait(), 5)


# --- model: through the cache service's GenerateContent ------------------------


@pytest.fixture
async def scripted_cache(certs_dir, tmp_path):
    server, port, servicer = await start_scripted_cache(certs_dir)
    client = CacheClient(context_settings(certs_dir, tmp_path, cache_target=f"127.0.0.1:{port}"))
    yield client, servicer
    await client.close()
    await server.stop(None)


async def test_adk_6273_model_prompt_keeps_language_and_tool_names(scripted_cache):
    client, cache = scripted_cache
    result = await run(ModelCompactor(client), make_request(), call(model_name="local-sim-1"), policy(compactor=CompactorKind.MODEL))
    assert result.summary == "## Goal\n- summarized"
    assert result.usage is not None and result.usage.prompt_tokens == 1234  # recorded apart by the caller
    sent = cache.requests[0]
    assert sent.scope.app == "app1" and sent.scope.user == "u1" and sent.request.model == "local-sim-1"
    prompt = sent.request.contents[0].parts[0].text
    assert "Tools used (keep these names exactly): read_file" in prompt
    assert "Bitte repariere" in prompt  # the language sample
    assert "language the user writes in" in sent.request.system_instruction.parts[0].text
    remaining = cache.time_remaining[0]
    assert remaining is not None and 0 < remaining <= 5.0  # the compactor's deadline travelled


async def test_model_empty_answer_is_refused(scripted_cache):
    client, cache = scripted_cache
    cache.reply = ""
    with pytest.raises(AgentCtxError) as exc:
        await run(ModelCompactor(client), make_request(), call(), policy(compactor=CompactorKind.MODEL))
    assert reason(exc) == "SUMMARY_EMPTY"


async def test_model_late_answer_times_out(scripted_cache):
    client, cache = scripted_cache
    cache.delay_s = 2
    with pytest.raises(AgentCtxError) as exc:
        await run(ModelCompactor(client), make_request(), call(), policy(compactor=CompactorKind.MODEL, timeout_s=0.3))
    assert reason(exc) == "COMPACTOR_TIMEOUT"


async def test_model_cache_errors_keep_their_reason(scripted_cache):
    client, cache = scripted_cache
    cache.error = (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limited")
    with pytest.raises(AgentCtxError) as exc:
        await run(ModelCompactor(client), make_request(), call(), policy(compactor=CompactorKind.MODEL))
    assert exc.value.code is Code.RESOURCE_EXHAUSTED


async def test_model_compactor_through_the_real_cache_service(certs_dir, tmp_path):
    """End to end: mTLS to the cache service, its local simulator answers."""
    from tests.support.servers import cache_settings, start_cache

    cache = await start_cache(cache_settings(certs_dir, tmp_path))
    client = CacheClient(context_settings(certs_dir, tmp_path, cache_target=f"127.0.0.1:{cache.port}"))
    try:
        result = await run(ModelCompactor(client), make_request(), call(model_name="local-sim-1"),
                           policy(compactor=CompactorKind.MODEL))
        assert result.summary.strip()
        assert result.usage is not None and result.usage.prompt_tokens > 0
    finally:
        await client.close()
        await cache.stop()


async def test_extractive_in_worker_processes_matches_in_loop():
    pooled = ExtractiveCompactor(processes=1)
    try:
        in_pool = await run(pooled, make_request(), call(timeout=60), policy(timeout_s=60))
        again = await run(pooled, make_request(), call(timeout=60), policy(timeout_s=60))
    finally:
        await pooled.close()
    in_loop = await run(ExtractiveCompactor(), make_request(), call(), policy())
    assert in_pool.summary == in_loop.summary == again.summary


@pytest.mark.parametrize("failure", [RuntimeError("main module cannot be imported again"), OSError("no processes")])
async def test_extractive_runs_in_the_loop_when_its_workers_cannot_start(monkeypatch, failure):
    """An embedding program without an ``if __name__ == "__main__"`` guard
    cannot start spawn workers: compaction still works, in the event loop."""
    pooled = ExtractiveCompactor(processes=1)

    def broken():
        raise failure

    monkeypatch.setattr(pooled, "_get_pool", broken)
    result = await run(pooled, make_request(), call(), policy())
    assert result.summary == (await run(ExtractiveCompactor(), make_request(), call(), policy())).summary
    await pooled.ready()  # nothing to start any more
    assert pooled._processes == 0
