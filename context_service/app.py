"""What the context service's RPCs share: settings and the resources built
at start-up. Areas add their resources here as they land."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import grpc

from agentctx_common.errors import Unavailable
from agentctx_common.reasons import Reason
from context_service.authz import Authorizer, Caller, TokenGrant
from context_service.cache_client import CacheClient
from context_service.compaction.service import CompactionService
from context_service.domain.config import ContextConfig, overlay
from context_service.domain.sessions import Limits, config_from_defaults
from context_service.history import HistoryCache
from context_service.settings import ContextSettings
from context_service.storage.base import SessionStore


@dataclass
class ContextApp:
    settings: ContextSettings
    # Sessions and events: the store is opened by build_server.
    store: SessionStore | None = None
    # Compaction (CompactSession, the Generate entry points, COMPRESS):
    # built by build_server.
    compaction_service: CompactionService | None = None
    # BuildContext's per-process cache of pruned, canonical event records.
    history: HistoryCache = dataclasses.field(default_factory=HistoryCache)
    # The one mTLS client of the cache service (Generate, diagnostics and the
    # model compactor share it): built by build_server.
    cache_client: CacheClient | None = None

    @property
    def sessions(self) -> SessionStore:
        if self.store is None:
            raise Unavailable("the session store is not open", reason=Reason.STORE_NOT_OPEN, retry_after=1.0)
        return self.store

    @property
    def compaction(self) -> CompactionService:
        if self.compaction_service is None:
            raise Unavailable("compaction is not running", reason=Reason.COMPACTION_NOT_RUNNING, retry_after=1.0)
        return self.compaction_service

    @property
    def cache(self) -> CacheClient:
        if self.cache_client is None:
            raise Unavailable("the cache service client is not set up", reason=Reason.CACHE_CLIENT_NOT_READY, retry_after=1.0)
        return self.cache_client

    @functools.cached_property
    def limits(self) -> Limits:
        s = self.settings
        return Limits(
            max_event_bytes=s.max_event_bytes, max_parts_per_event=s.max_parts_per_event,
            max_state_bytes=s.max_state_bytes, max_json_depth=s.max_json_depth, id_pattern=s.id_pattern, owner_id_pattern=s.owner_id_pattern,
            default_session_page_size=s.default_session_page_size, default_event_page_size=s.default_event_page_size,
            max_page_size=s.max_page_size, max_clock_skew_s=s.max_event_clock_skew_s,
        )

    @functools.cached_property
    def authorizer(self) -> Authorizer:
        s = self.settings
        tokens = [TokenGrant(t.name, t.sha256, frozenset(t.apps)) for t in s.bearer_tokens]
        return Authorizer(s.app_grants, tokens, s.dev_anonymous_apps)

    def caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """The RPC's caller: UNAUTHENTICATED without an identity,
        PERMISSION_DENIED for an identity with no grant."""
        return self.authorizer.caller(context)

    async def authorize(self, context: grpc.aio.ServicerContext, app: str) -> Caller:
        """Every RPC that touches a session calls this (or caller() then
        Caller.require) before anything else: the caller, allowed ``app``,
        or UNAUTHENTICATED / PERMISSION_DENIED."""
        caller = self.caller(context)
        caller.require(app)
        return caller

    @functools.cached_property
    def session_defaults(self) -> ContextConfig:
        defaults = config_from_defaults(self.settings.session_defaults)
        return defaults if defaults.model else dataclasses.replace(defaults, model=self.settings.default_model)

    def effective_config(self, session_config: ContextConfig) -> ContextConfig:
        """A session's stored config over the server-wide defaults."""
        return overlay(self.session_defaults, session_config)
