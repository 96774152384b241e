"""GetContextLifecycle and InvalidateContextCache over gRPC, against the
real service pair in this process."""

from __future__ import annotations

import logging

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import cache_pb2, event_pb2
from agentctx_common.reasons import Reason
from tests.diagnostics import helpers as h
from tests.sessions.helpers import rpc_error


async def _lifecycle(pair, name: str, model: str = "") -> pb.ContextLifecycle:  # type: ignore[no-untyped-def]
    return await pair.agent.GetContextLifecycle(pb.GetContextLifecycleRequest(session=name, model=model), timeout=10)


async def test_lifecycle_of_a_fresh_session_counts_events_and_the_empty_scope(pair) -> None:
    name = await h.create_session(pair.agent, "fresh", turns=3)
    view = await _lifecycle(pair, name)
    assert (view.session, view.model, view.event_count, view.visible_event_count) == (name, h.MODEL, 9, 9)
    assert view.compaction_count == 0 and view.latest_checkpoint_id == "" and view.latest_compaction_event_id == ""
    assert view.latest_trigger == event_pb2.COMPACTION_TRIGGER_UNSPECIFIED
    assert view.visible_tokens > 0
    assert view.cache_service_reachable
    assert len(view.scope_fingerprint) == 64
    assert (view.cache_entry_count, view.cache_inflight_count, view.cache_waiter_count) == (0, 0, 0)
    assert not view.HasField("latest_cache")


async def test_lifecycle_reports_the_latest_checkpoint_after_compaction(pair) -> None:
    name = await h.create_session(pair.agent, "compacted", turns=8)
    first = await h.compact(pair.agent, name)
    await h.create_session(pair.agent, "other", turns=1)  # a neighbour that must not count
    assert first.compacted
    view = await _lifecycle(pair, name)
    checkpoint = first.compaction.compaction.checkpoint
    assert view.compaction_count == 1
    assert view.event_count == 8 * 3 + 1
    assert view.latest_compaction_event_id == first.compaction.id
    assert view.latest_checkpoint_id == checkpoint.checkpoint_id and view.latest_checkpoint_id
    assert view.latest_trigger == event_pb2.COMPACTION_TRIGGER_MANUAL
    assert view.latest_source_fingerprint == checkpoint.source_fingerprint
    assert view.visible_event_count == first.kept_events < 8 * 3


async def test_lifecycle_counts_the_scope_caches_and_names_the_scope_by_model_and_labels(pair) -> None:
    name = await h.create_session(pair.agent, "cached", labels={"ctx": h.LABEL_VALUE})
    before = await _lifecycle(pair, name)
    planted = await h.plant_cache(pair.cache_stub, labels={"ctx": h.LABEL_VALUE})
    after = await _lifecycle(pair, name)
    assert after.scope_fingerprint == before.scope_fingerprint == planted.metadata.scope_fingerprint
    assert after.cache_entry_count == 1
    # Another model is another scope: nothing cached there.
    other = await _lifecycle(pair, name, model="local-sim-2")
    assert other.model == "local-sim-2" and other.scope_fingerprint != after.scope_fingerprint
    assert other.cache_entry_count == 0


async def test_lifecycle_shows_the_newest_reply_cache_record_only(pair) -> None:
    name = await h.create_session(pair.agent, "reply", turns=1)
    for i, state in enumerate((cache_pb2.CACHE_STATE_CREATED, cache_pb2.CACHE_STATE_HIT)):
        reply = event_pb2.Event(id=f"m{i}", author="model")
        reply.content.role = "model"
        reply.content.parts.add().text = h.CONTENT
        reply.cache_metadata.state = state
        reply.cache_metadata.prefix_fingerprint = "a" * 64
        reply.cache_metadata.prefix_tokens = 1500 + i
        reply.cache_metadata.uses = i + 1
        await pair.agent.AppendEvent(pb.AppendEventRequest(parent=name, event=reply))
    view = await _lifecycle(pair, name)
    assert view.latest_cache.state == cache_pb2.CACHE_STATE_HIT
    assert (view.latest_cache.prefix_tokens, view.latest_cache.uses) == (1501, 2)


async def test_lifecycle_without_the_cache_service_reports_it_unreachable(pair_factory) -> None:
    pair = await pair_factory(with_cache=False)
    name = await h.create_session(pair.agent, "nocache", turns=2)
    view = await _lifecycle(pair, name)
    assert not view.cache_service_reachable
    assert view.scope_fingerprint == ""
    assert (view.cache_entry_count, view.cache_inflight_count, view.cache_waiter_count) == (0, 0, 0)
    assert view.event_count == 6


async def test_lifecycle_and_invalidation_errors(pair) -> None:
    name = await h.create_session(pair.agent, "errs", turns=1)
    missing = h.session_name("nope")
    err = await rpc_error(_lifecycle(pair, missing))
    assert (err.code.value, err.reason) == ("NOT_FOUND", "SESSION_NOT_FOUND")
    err = await rpc_error(_lifecycle(pair, "apps/x/sessions/y"))
    assert err.code.value == "INVALID_ARGUMENT" and [v.field for v in err.field_violations] == ["session"]
    err = await rpc_error(_lifecycle(pair, name, model="bad model!"))
    assert err.code.value == "INVALID_ARGUMENT" and [v.field for v in err.field_violations] == ["model"]
    err = await rpc_error(pair.agent.InvalidateContextCache(pb.InvalidateContextCacheRequest(session=name)))
    assert (err.code.value, err.reason) == ("INVALID_ARGUMENT", Reason.INVALIDATION_CONFIRMATION_REQUIRED)


async def test_another_apps_caller_is_denied_before_anything_is_read(pair_factory, certs_dir) -> None:
    from agentctx.context.v1 import context_service_pb2_grpc
    from agentctx_common.certs import SAMPLE_AGENT_ID
    from tests.support.servers import secure_channel

    pair = await pair_factory(context={"app_grants": {SAMPLE_AGENT_ID: ["someone-else"]}, "dev_anonymous_apps": [],
                                          "require_client_cert": True})
    async with secure_channel(pair.context_port, certs_dir) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        err = await rpc_error(stub.GetContextLifecycle(pb.GetContextLifecycleRequest(session=h.session_name("s"))))
        assert err.code.value == "PERMISSION_DENIED"
        request = pb.InvalidateContextCacheRequest(session=h.session_name("s"), confirmation=h.confirmation("s", "0" * 64))
        err = await rpc_error(stub.InvalidateContextCache(request))
        assert err.code.value == "PERMISSION_DENIED"


@pytest.mark.parametrize("field", ["app", "user", "session", "model", "scope_fingerprint"])
async def test_a_wrong_confirmation_changes_nothing_and_names_the_field(pair, field: str) -> None:
    name = await h.create_session(pair.agent, "inv", turns=1)
    await h.plant_cache(pair.cache_stub)
    view = await _lifecycle(pair, name)
    wrong = {"app": "other-app", "user": "other-user", "session": "other", "model": "local-sim-2",
             "scope_fingerprint": "f" * 64}[field]
    request = pb.InvalidateContextCacheRequest(
        session=name, confirmation=h.confirmation("inv", view.scope_fingerprint, **{field: wrong})
    )
    err = await rpc_error(pair.agent.InvalidateContextCache(request, timeout=10))
    assert (err.code.value, err.reason) == ("FAILED_PRECONDITION", Reason.INVALIDATION_CONFIRMATION_MISMATCH)
    assert err.metadata["fields"] == field
    assert [v.subject for v in err.precondition_violations] == [f"confirmation.{field}"]
    # Neither the expected value nor the scope fingerprint is echoed.
    assert view.scope_fingerprint not in err.message and view.scope_fingerprint not in str(err.metadata)
    assert (await _lifecycle(pair, name)).cache_entry_count == 1


async def test_the_right_confirmation_drops_every_cache_of_the_scope(pair) -> None:
    name = await h.create_session(pair.agent, "inv-ok", turns=1)
    planted = await h.plant_cache(pair.cache_stub)
    view = await _lifecycle(pair, name)
    assert view.cache_entry_count == 1
    request = pb.InvalidateContextCacheRequest(session=name, confirmation=h.confirmation("inv-ok", view.scope_fingerprint))
    done = await pair.agent.InvalidateContextCache(request, timeout=10)
    assert (done.entries_removed, done.inflight_cancelled, done.scope_fingerprint) == (1, 0, view.scope_fingerprint)
    assert (await _lifecycle(pair, name)).cache_entry_count == 0
    from agentctx.cache.v1 import cache_service_pb2 as cpb

    resolved = await pair.cache_stub.ResolveLease(cpb.ResolveLeaseRequest(lease=planted.lease))
    assert (resolved.valid, resolved.invalid_reason) == (False, "INVALIDATED")
    # Repeating it is harmless: nothing left to remove.
    again = await pair.agent.InvalidateContextCache(request, timeout=10)
    assert again.entries_removed == 0


async def test_invalidation_needs_the_cache_service(pair_factory) -> None:
    pair = await pair_factory(with_cache=False)
    name = await h.create_session(pair.agent, "down", turns=1)
    request = pb.InvalidateContextCacheRequest(session=name, confirmation=h.confirmation("down", "0" * 64))
    err = await rpc_error(pair.agent.InvalidateContextCache(request, timeout=10))
    assert (err.code.value, err.reason) == ("UNAVAILABLE", "CACHE_SERVICE_UNAVAILABLE")
    assert err.retry_after is not None
    # A wrong identifier is reported without asking the cache service.
    request.confirmation.model = "local-sim-9"
    err = await rpc_error(pair.agent.InvalidateContextCache(request, timeout=10))
    assert (err.code.value, err.metadata["fields"]) == ("FAILED_PRECONDITION", "model")


async def test_no_response_log_span_or_error_holds_content_secrets_or_resource_names(
    pair, caplog, span_exporter
) -> None:
    labels = {"ctx": h.LABEL_VALUE}
    name = await h.create_session(pair.agent, "scan", labels=labels, turns=8)
    await h.compact(pair.agent, name)
    await h.plant_cache(pair.cache_stub, labels=labels)
    caplog.set_level(logging.DEBUG)
    span_exporter.clear()
    view = await _lifecycle(pair, name)
    assert view.cache_entry_count == 1 and view.compaction_count == 1
    wrong = pb.InvalidateContextCacheRequest(session=name, confirmation=h.confirmation("scan", "0" * 64))
    err = await rpc_error(pair.agent.InvalidateContextCache(wrong, timeout=10))
    right = pb.InvalidateContextCacheRequest(session=name, confirmation=h.confirmation("scan", view.scope_fingerprint))
    done = await pair.agent.InvalidateContextCache(right, timeout=10)
    ended = span_exporter.get_finished_spans()
    assert ended, "the diagnostic RPCs are traced"
    span_text = " ".join(f"{s.name} {dict(s.attributes or {})} {[e.attributes for e in s.events]}" for s in ended)
    texts = [*h.wire_forms(view), *h.wire_forms(done), err.message, str(err.metadata),
             str(err.precondition_violations), caplog.text, span_text]
    for text in texts:
        for forbidden in (h.SECRET, h.CONTENT, h.LABEL_VALUE, "cachedContents/", "step 1", "deploy", "api_key"):
            assert forbidden not in text, forbidden


async def test_an_unknown_field_in_the_request_is_rejected(pair, certs_dir) -> None:
    from tests.support.servers import secure_channel

    name = await h.create_session(pair.agent, "unk", turns=1)
    # Field 99 (varint 1) is not in the contract.
    raw = pb.GetContextLifecycleRequest(session=name).SerializeToString() + b"\x98\x06\x01"
    async with secure_channel(pair.context_port, certs_dir) as channel:
        call = channel.unary_unary(
            "/agentctx.context.v1.ContextService/GetContextLifecycle",
            request_serializer=lambda b: b, response_deserializer=pb.ContextLifecycle.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(raw, timeout=10)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.postgres
async def test_lifecycle_on_postgresql(pair_factory, postgres_url: str) -> None:
    from tests.sessions.helpers import migrate

    await migrate(postgres_url)
    pair = await pair_factory(context={"database_url": postgres_url})
    name = await h.create_session(pair.agent, "pg", turns=8)
    compacted = await h.compact(pair.agent, name)
    await h.create_session(pair.agent, "pg-other", turns=2)
    view = await _lifecycle(pair, name)
    assert (view.event_count, view.compaction_count) == (25, 1)
    assert view.latest_checkpoint_id == compacted.compaction.compaction.checkpoint.checkpoint_id
    assert view.visible_event_count == compacted.kept_events
    empty = await h.create_session(pair.agent, "pg-empty", turns=0)
    assert ((await _lifecycle(pair, empty)).event_count, (await _lifecycle(pair, empty)).compaction_count) == (0, 0)
