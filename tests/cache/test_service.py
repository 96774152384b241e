"""The CacheService over real gRPC (mTLS on 127.0.0.1:0) with the local
simulator: the whole lease lifecycle, streaming, rich error statuses, the
prefix fingerprint the context service also computes, and the allowlist."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, content_pb2
from agentctx_common.canonical import fingerprint, prefix_json
from agentctx_common.errors import AgentCtxError
from agentctx_common.status import error_from_rpc
from cache_service.domain.clock import ManualClock
from cache_service.domain.ports import RateLimited
from tests.cache import protos

CREATED, HIT, BYPASS = cache_pb2.CACHE_STATE_CREATED, cache_pb2.CACHE_STATE_HIT, cache_pb2.CACHE_STATE_BYPASS


async def _error(call) -> AgentCtxError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return error_from_rpc(err.value)


async def test_256_concurrent_acquire_lease_rpcs_make_one_provider_create(cache_rpc) -> None:
    stub, app, _ = await cache_rpc(max_waiters=256, max_inflight_rpcs=256)
    app.providers["local"].latency_s = 0.05
    replies = await asyncio.gather(*(stub.AcquireLease(protos.acquire(3), timeout=30) for _ in range(256)))
    assert app.providers["local"].counts["create"] == 1
    states = [r.metadata.state for r in replies]
    assert states.count(CREATED) == 1 and states.count(HIT) == 255
    assert all(r.lease for r in replies)


async def test_one_turn_through_every_rpc(cache_rpc) -> None:
    stub, app, _ = await cache_rpc()
    acquired = await stub.AcquireLease(protos.acquire(3, ttl_s=600))
    meta = acquired.metadata
    assert meta.state == CREATED and meta.prefix_tokens > 0 and meta.uses == 1
    assert meta.expire_time.seconds > 0 and len(meta.scope_fingerprint) == 64
    resolved = await stub.ResolveLease(pb.ResolveLeaseRequest(lease=acquired.lease))
    assert resolved.valid and resolved.metadata.prefix_fingerprint == meta.prefix_fingerprint
    reply = await stub.GenerateContent(protos.generate(3, acquired.lease))
    assert reply.cache.state == CREATED and reply.cache.prefix_fingerprint == meta.prefix_fingerprint
    usage = reply.response.usage
    assert usage.cached_prompt_tokens == meta.prefix_tokens and usage.prompt_tokens > usage.cached_prompt_tokens
    assert reply.response.finish_reason != 0 and reply.response.content.parts[0].text
    status = await stub.GetScopeStatus(pb.GetScopeStatusRequest(scope=protos.scope()))
    assert (status.entry_count, status.inflight_count, status.waiter_count) == (1, 0, 0)
    assert status.prefix_bytes > 0 and status.scope_fingerprint == meta.scope_fingerprint
    assert (await stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=acquired.lease))).released
    assert not (await stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=acquired.lease))).released
    invalidated = await stub.InvalidateScope(pb.InvalidateScopeRequest(scope=protos.scope()))
    assert (invalidated.entries_removed, invalidated.inflight_cancelled) == (1, 0)
    assert invalidated.scope_fingerprint == meta.scope_fingerprint
    assert (await stub.GetScopeStatus(pb.GetScopeStatusRequest(scope=protos.scope()))).entry_count == 0
    await app.janitor.drain()
    assert app.providers["local"].counts["delete"] == 1


async def test_a_created_lease_used_for_several_calls_reports_its_create_once(cache_rpc) -> None:
    # A lease from AcquireLease serves GenerateContent (and StreamGenerateContent) calls until it expires.
    stub, _, _ = await cache_rpc()
    acquired = await stub.AcquireLease(protos.acquire(3))
    assert acquired.metadata.state == CREATED
    replies = [await stub.GenerateContent(protos.generate(3, acquired.lease, question=q)) for q in ("a?", "b?")]
    streamed = [c async for c in stub.StreamGenerateContent(
        pb.StreamGenerateContentRequest(call=protos.generate(3, acquired.lease, question="c?")))]
    usages = [r.response.usage for r in replies] + [streamed[-1].chunk.usage]
    states = [r.cache.state for r in replies] + [streamed[-1].cache.state]
    assert [u.cache_write_tokens for u in usages] == [acquired.metadata.prefix_tokens, 0, 0]
    assert all(u.cached_prompt_tokens == acquired.metadata.prefix_tokens for u in usages)
    assert states == [CREATED, HIT, HIT]


async def test_the_prefix_fingerprint_is_the_canonical_one_both_services_compute(cache_rpc) -> None:
    stub, _, _ = await cache_rpc()
    request = protos.acquire(3)
    reply = await stub.AcquireLease(request)
    p = request.prefix
    expected = fingerprint(prefix_json(request.scope.model, p.system_instruction, p.tools, None, p.history))
    assert reply.metadata.prefix_fingerprint == expected


async def test_stream_generate_content_puts_cache_metadata_on_the_last_chunk(cache_rpc) -> None:
    stub, _, _ = await cache_rpc()
    lease = (await stub.AcquireLease(protos.acquire(3))).lease
    chunks = [c async for c in stub.StreamGenerateContent(
        pb.StreamGenerateContentRequest(call=protos.generate(3, lease)))]
    assert len(chunks) == 3
    assert [c.HasField("cache") for c in chunks] == [False, False, True]
    assert [c.chunk.HasField("usage") for c in chunks] == [False, False, True]
    assert chunks[-1].cache.state == CREATED and chunks[-1].chunk.usage.cached_prompt_tokens > 0


async def test_lease_problems_are_refused_with_their_reasons(cache_rpc) -> None:
    stub, _, _ = await cache_rpc()
    lease = (await stub.AcquireLease(protos.acquire(3))).lease
    forged = await _error(stub.GenerateContent(protos.generate(3, "v1.eyJ4IjoxfQ.AAAA")))
    assert (forged.code.value, forged.reason, forged.metadata) == (
        "FAILED_PRECONDITION", "LEASE_INVALID", {"invalid_reason": "MALFORMED"})
    other = await _error(stub.GenerateContent(protos.generate(3, lease, user="intruder")))
    assert (other.code.value, other.reason) == ("PERMISSION_DENIED", "LEASE_SCOPE_MISMATCH")
    changed = protos.generate(3, lease)
    changed.request.system_instruction.parts[0].text = "something else"
    mismatch = await _error(stub.GenerateContent(changed))
    assert (mismatch.code.value, mismatch.reason) == ("FAILED_PRECONDITION", "LEASE_PREFIX_MISMATCH")
    resolved = await stub.ResolveLease(pb.ResolveLeaseRequest(lease="v1.eyJ4IjoxfQ.AAAA"))
    assert (resolved.valid, resolved.invalid_reason) == (False, "MALFORMED")
    await stub.InvalidateScope(pb.InvalidateScopeRequest(scope=protos.scope()))
    resolved = await stub.ResolveLease(pb.ResolveLeaseRequest(lease=lease))
    assert (resolved.valid, resolved.invalid_reason) == (False, "INVALIDATED")
    gone = await _error(stub.GenerateContent(protos.generate(3, lease)))
    assert (gone.reason, gone.metadata["invalid_reason"]) == ("LEASE_INVALID", "INVALIDATED")


async def test_an_expired_lease_resolves_as_expired(cache_rpc) -> None:
    clock = ManualClock()
    stub, _, _ = await cache_rpc(clock=clock)
    lease = (await stub.AcquireLease(protos.acquire(3))).lease
    clock.advance(121)  # lease_ttl_s
    resolved = await stub.ResolveLease(pb.ResolveLeaseRequest(lease=lease))
    assert (resolved.valid, resolved.invalid_reason) == (False, "EXPIRED")


async def test_bad_input_is_invalid_argument_with_field_violations(cache_rpc) -> None:
    stub, _, _ = await cache_rpc()
    bad = protos.acquire(3, app="")
    bad.prefix.history.append(content_pb2.Content(role="system", parts=[content_pb2.Part()]))
    err = await _error(stub.AcquireLease(bad))
    assert err.code.value == "INVALID_ARGUMENT"
    fields = {v.field for v in err.field_violations}
    assert "scope.app" in fields
    bad = protos.acquire(3)
    bad.prefix.history.append(content_pb2.Content(role="system", parts=[content_pb2.Part()]))
    err = await _error(stub.AcquireLease(bad))
    assert {v.field for v in err.field_violations} == {"prefix.history[6].role", "prefix.history[6].parts[0]"}
    err = await _error(stub.AcquireLease(protos.acquire(3, provider="acme")))
    assert [v.field for v in err.field_violations] == ["scope.provider"]
    err = await _error(stub.AcquireLease(protos.acquire(3, provider="gemini")))
    assert (err.code.value, err.reason) == ("FAILED_PRECONDITION", "PROVIDER_NOT_CONFIGURED")
    err = await _error(stub.AcquireLease(protos.acquire(3, policy={"blob": "x" * 20_000})))
    assert (err.code.value, err.reason) == ("INVALID_ARGUMENT", "SCOPE_TOO_LARGE")
    request = protos.generate(3)
    request.scope.model = "local-sim-2"
    err = await _error(stub.GenerateContent(request))
    assert [v.field for v in err.field_violations] == ["request.model"]


async def test_provider_errors_map_to_rich_statuses(cache_rpc) -> None:
    stub, app, _ = await cache_rpc(local_context_window=400)
    app.providers["local"].fail_next("generate", RateLimited(retry_after=4))
    limited = await _error(stub.GenerateContent(protos.generate(1)))
    assert (limited.code.value, limited.reason, limited.retry_after) == ("RESOURCE_EXHAUSTED", "RATE_LIMITED", 4.0)
    overflow = await _error(stub.GenerateContent(protos.generate(5)))
    assert (overflow.code.value, overflow.reason) == ("INVALID_ARGUMENT", "CONTEXT_WINDOW_EXCEEDED")
    assert overflow.metadata["context_window"] == "400" and int(overflow.metadata["prompt_tokens"]) > 400


async def test_failure_mode_error_turns_a_create_failure_into_a_status(cache_rpc) -> None:
    stub, app, _ = await cache_rpc(failure_mode="error")
    app.providers["local"].fail_next("create", RateLimited(retry_after=2))
    err = await _error(stub.AcquireLease(protos.acquire(3)))
    assert (err.code.value, err.reason, err.retry_after) == ("RESOURCE_EXHAUSTED", "RATE_LIMITED", 2.0)
    # In bypass mode (the default) the same failure is a BYPASS result.
    stub, app, _ = await cache_rpc()
    app.providers["local"].fail_next("create", RateLimited(retry_after=2))
    reply = await stub.AcquireLease(protos.acquire(3))
    assert reply.metadata.state == BYPASS and reply.metadata.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_RATE_LIMITED
    assert reply.lease == ""


async def test_only_allowlisted_callers_reach_the_service(cache_rpc) -> None:
    stub, _, _ = await cache_rpc(client="agent-client")
    err = await _error(stub.GetScopeStatus(pb.GetScopeStatusRequest(scope=protos.scope())))
    assert (err.code.value, err.reason) == ("PERMISSION_DENIED", "IDENTITY_NOT_ALLOWED")


async def test_an_uncached_call_needs_no_app_or_user(cache_rpc) -> None:
    stub, _, _ = await cache_rpc()
    reply = await stub.GenerateContent(pb.GenerateContentRequest(request=protos.model_request(1)))
    assert reply.response.content.parts and reply.cache.state == cache_pb2.CACHE_STATE_UNSPECIFIED
