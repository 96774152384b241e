"""What the context service's RPCs share: settings, the storage backend and
the application services, put together by ``server.build_server`` (the
composition root)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import grpc

from context_service.authz import Authorizer, Caller, TokenGrant
from context_service.building.builder import ContextBuilder
from context_service.compaction.service import CompactionService
from context_service.domain.config import ContextConfig, overlay
from context_service.domain.config_defaults import config_from_defaults
from context_service.domain.limits import Limits
from context_service.mapping.build_context import RequestMapper
from context_service.memory.service import MemoryService
from context_service.ports import ArtifactStore, CachePort, LifecycleReader, SessionStore
from context_service.settings import ContextSettings
from context_service.tools import ToolContexts
from context_service.turns.runner import TurnRunner


@dataclass
class ContextApp:
    settings: ContextSettings
    # The server-wide config every session's own config overlays.
    defaults: ContextConfig
    sessions: SessionStore
    lifecycle: LifecycleReader
    builder: ContextBuilder
    compaction: CompactionService
    cache: CachePort
    turns: TurnRunner
    artifacts: ArtifactStore
    memory: MemoryService
    tools: ToolContexts
    mapper: RequestMapper = dataclasses.field(default_factory=RequestMapper)

    @functools.cached_property
    def limits(self) -> Limits:
        return limits_of(self.settings)

    @functools.cached_property
    def authorizer(self) -> Authorizer:
        s = self.settings
        tokens = [TokenGrant(t.name, t.sha256, frozenset(t.apps)) for t in s.bearer_tokens]
        return Authorizer(s.app_grants, tokens, s.dev_anonymous_apps)

    def caller(self, context: grpc.aio.ServicerContext[Any, Any]) -> Caller:
        """The RPC's caller: UNAUTHENTICATED without an identity,
        PERMISSION_DENIED for an identity with no grant."""
        return self.authorizer.caller(context)

    async def authorize(self, context: grpc.aio.ServicerContext[Any, Any], app: str) -> Caller:
        """Every RPC that touches a session calls this (or caller() then
        Caller.require) before anything else: the caller, allowed ``app``,
        or UNAUTHENTICATED / PERMISSION_DENIED."""
        caller = self.caller(context)
        caller.require(app)
        return caller

    def effective_config(self, session_config: ContextConfig) -> ContextConfig:
        """A session's stored config over the server-wide defaults."""
        return overlay(self.defaults, session_config)


def limits_of(s: ContextSettings) -> Limits:
    return Limits(
        max_event_bytes=s.max_event_bytes, max_parts_per_event=s.max_parts_per_event,
        max_state_bytes=s.max_state_bytes, max_json_depth=s.max_json_depth, id_pattern=s.id_pattern, owner_id_pattern=s.owner_id_pattern,
        default_session_page_size=s.default_session_page_size, default_event_page_size=s.default_event_page_size,
        max_page_size=s.max_page_size, max_clock_skew_s=s.max_event_clock_skew_s,
    )


def session_defaults(settings: ContextSettings) -> ContextConfig:
    """The server-wide config every session's own config overlays."""
    defaults = config_from_defaults(settings.session_defaults)
    return defaults if defaults.model else dataclasses.replace(defaults, model=settings.default_model)
