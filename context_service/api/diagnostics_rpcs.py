"""DiagnosticsRpcs: GetContextLifecycle and InvalidateContextCache.

Both authorize the caller for the session's app first, then read the
session (NOT_FOUND before anything is revealed about its cache). The
lifecycle view never fails because of the cache service: when it cannot be
reached the cache counts are zero and ``cache_service_reachable`` is false.
An invalidation checks the confirmation's identifiers before calling the
cache service and its scope fingerprint against the scope's current one
after, so any mismatch is FAILED_PRECONDITION with nothing changed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import Message

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.errors import AgentCtxError
from agentctx_common.protos import unknown_field_violations
from agentctx_common.reasons import Reason
from context_service.domain import diagnostics as diag
from context_service.domain.cache_calls import CacheScope
from context_service.domain.config import ContextConfig
from context_service.domain.limits import raise_if
from context_service.domain.model import SessionKey
from context_service.domain.names import parse_session_name
from context_service.domain.selection.policy import effective_policy
from context_service.mapping.convert import cache_to_proto, trigger_to_proto
from context_service.turns.gateway import cache_scope

if TYPE_CHECKING:
    from context_service.app import ContextApp

log = logging.getLogger("agentctx.context.diagnostics")

# A diagnostic view must come back promptly even when the cache service
# hangs: its status call gets at most this long.
SCOPE_STATUS_TIMEOUT_S = 5.0


def lifecycle_to_proto(view: diag.Lifecycle) -> pb.ContextLifecycle:
    out = pb.ContextLifecycle(
        session=view.session,
        model=view.model,
        event_count=view.event_count,
        compaction_count=view.compaction_count,
        visible_event_count=view.visible_event_count,
        visible_tokens=view.visible_tokens,
        latest_checkpoint_id=view.latest_checkpoint_id,
        latest_compaction_event_id=view.latest_compaction_event_id,
        latest_trigger=trigger_to_proto(view.latest_trigger),
        latest_source_fingerprint=view.latest_source_fingerprint,
        pending_compaction_jobs=view.pending_compaction_jobs,
        scope_fingerprint=view.scope.scope_fingerprint,
        cache_entry_count=view.scope.entry_count,
        cache_inflight_count=view.scope.inflight_count,
        cache_waiter_count=view.scope.waiter_count,
        cache_service_reachable=view.scope.reachable,
    )
    if view.latest_cache is not None:
        cache_to_proto(view.latest_cache, out.latest_cache)
    return out


class DiagnosticsRpcs:
    app: ContextApp

    async def _target(
        self, session: str, model: str, request: Message, context: grpc.aio.ServicerContext[Any, Any]
    ) -> tuple[SessionKey, str, ContextConfig]:
        caller = self.app.caller(context)
        key = parse_session_name(session, self.app.limits, "session")
        caller.require(key.app)
        raise_if(unknown_field_violations(request, ""), Reason.INVALID_DIAGNOSTICS_REQUEST)
        record = await self.app.sessions.get_session(key)
        # The same scope Generate leases in: one definition, in turns.gateway.
        config = self.app.effective_config(record.config)
        return key, diag.resolve_model(model, config, self.app.settings.default_model), config

    async def GetContextLifecycle(
        self, request: pb.GetContextLifecycleRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ContextLifecycle:
        key, model, config = await self._target(request.session, request.model, request, context)
        facts = await self.app.lifecycle.lifecycle_facts(key)
        scope = await self._scope_counts(cache_scope(key, model, config.cache), context)
        bytes_per_token = effective_policy(config.selection, None).bytes_per_token or 4.0
        return lifecycle_to_proto(diag.build_lifecycle(key, model, facts, scope, bytes_per_token=bytes_per_token))

    async def InvalidateContextCache(
        self, request: pb.InvalidateContextCacheRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.InvalidateContextCacheResponse:
        key, model, config = await self._target(request.session, request.model, request, context)
        diag.require_confirmation(request.HasField("confirmation"))
        c = request.confirmation
        given = diag.Confirmation(c.app, c.user, c.session, c.model, c.scope_fingerprint)
        diag.check_confirmation(diag.Confirmation.expected(key, model), given, check_fingerprint=False)
        scope = cache_scope(key, model, config.cache)
        remaining = context.time_remaining()
        # Unreachable: UNAVAILABLE, and nothing changed.
        status = await self.app.cache.scope_status(scope, remaining=remaining)
        diag.check_confirmation(diag.Confirmation.expected(key, model, status.scope_fingerprint), given)
        done = await self.app.cache.invalidate_scope(scope, remaining=context.time_remaining())
        log.info("cache scope invalidated", extra={
            "scope": done.scope_fingerprint[:16], "entries": done.entries_removed, "inflight": done.inflight_cancelled,
        })
        return pb.InvalidateContextCacheResponse(
            entries_removed=done.entries_removed,
            inflight_cancelled=done.inflight_cancelled,
            scope_fingerprint=done.scope_fingerprint,
        )

    async def _scope_counts(
        self, scope: CacheScope, context: grpc.aio.ServicerContext[Any, Any]
    ) -> diag.ScopeCounts:
        remaining = context.time_remaining()
        budget = SCOPE_STATUS_TIMEOUT_S if remaining is None else min(SCOPE_STATUS_TIMEOUT_S, remaining * 0.8)
        try:
            status = await self.app.cache.scope_status(scope, remaining=budget)
        except AgentCtxError as exc:
            # Diagnostics must not fail because of the cache service.
            log.info("cache scope status unavailable", extra={"reason": exc.reason})
            return diag.ScopeCounts.unreachable()
        return diag.ScopeCounts(
            status.scope_fingerprint, status.entry_count, status.inflight_count, status.waiter_count
        )
