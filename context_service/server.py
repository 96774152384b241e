"""Context service entry points: ``build_server`` (bound, not started) and
``serve`` (runs until SIGTERM/SIGINT).

``build_server`` is the composition root: it opens the storage backend,
builds the adapters (cache-service client, compactors) and the application
services on their ports, and registers the servicers (see
docs/ARCHITECTURE.md, "Layers")."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable

import grpc

from agentctx.context.v1 import (
    artifacts_pb2,
    artifacts_pb2_grpc,
    context_service_pb2,
    context_service_pb2_grpc,
    tool_context_pb2,
    tool_context_pb2_grpc,
)
from agentctx.memory.v1 import memory_service_pb2, memory_service_pb2_grpc
from agentctx_common.logs import configure_logging
from agentctx_common.server import GrpcServer, new_server, serve_until_signal
from agentctx_common.telemetry import configure_telemetry
from agentctx_common.tls import channel_credentials
from context_service.api.artifact_rpcs import ArtifactServicer
from context_service.api.memory_rpcs import MemoryServicer
from context_service.api.selection_rpcs import register_raw_build_context
from context_service.api.servicer import ContextServicer
from context_service.api.tool_context_rpcs import ToolContextServicer
from context_service.app import ContextApp, limits_of, session_defaults
from context_service.building.appends import ObservedSessions
from context_service.building.attachments import AttachmentLoader
from context_service.building.builder import ContextBuilder
from context_service.building.history import HistoryCache
from context_service.building.tail import TailReader
from context_service.cache_client import CacheClient
from context_service.compaction.runtime import CompactionRuntime, start_compaction
from context_service.domain.config import overlay
from context_service.domain.memory import SemanticMemory
from context_service.domain.tool_tokens import KeySet, SigningKey, ToolTokenCodec
from context_service.mapping.wire import render
from context_service.memory.service import MemoryService
from context_service.settings import ContextSettings
from context_service.storage.factory import Backend, open_backend
from context_service.tools import ToolContexts
from context_service.turns.runner import TurnRunner

SERVICE_NAME = context_service_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name
ARTIFACT_SERVICE_NAME = artifacts_pb2.DESCRIPTOR.services_by_name["ArtifactService"].full_name
MEMORY_SERVICE_NAME = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name
TOOL_CONTEXT_SERVICE_NAME = tool_context_pb2.DESCRIPTOR.services_by_name["ToolContextService"].full_name
# How often the upload collector runs, at most: released object-store
# bytes (a deleted session's) wait no longer than this.
COLLECT_EVERY = dt.timedelta(minutes=1)
TOOL_SWEEP_S = 15.0
TOOL_SWEEP_BATCH = 100  # expired calls dropped per pass; a full pass goes on at once
log = logging.getLogger("agentctx.context.server")


def register_servicer(server: grpc.aio.Server, servicer: ContextServicer, artifacts: ArtifactServicer | None = None) -> None:
    # The generated gRPC module has no type stubs.
    context_service_pb2_grpc.add_ContextServiceServicer_to_server(servicer, server)
    register_raw_build_context(server, servicer)
    memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(servicer.app), server)
    tool_context_pb2_grpc.add_ToolContextServiceServicer_to_server(ToolContextServicer(servicer.app), server)
    if artifacts is not None:
        artifacts_pb2_grpc.add_ArtifactServiceServicer_to_server(artifacts, server)


def start_upload_collector(backend: Backend, grace: dt.timedelta) -> asyncio.Task[None]:
    """Deletes released artifact bytes and uploads abandoned for ``grace``
    (their staged chunks, objects and multipart parts) at start and then
    every min(grace / 4, COLLECT_EVERY), in every replica (idempotent)."""
    every = max(min(grace / 4, COLLECT_EVERY).total_seconds(), 1.0)
    return _every(every, lambda: backend.artifacts.collect_uploads(grace), "artifact upload collection failed")


def start_artifact_scrubber(backend: Backend, interval: dt.timedelta, grace: dt.timedelta) -> asyncio.Task[None]:
    """Scrubs the artifact bytes against the database (ArtifactStore.scrub)
    every ``interval``, the first pass at a random point of the first
    interval (replicas started together do not list the bucket together;
    one restarted often still scrubs)."""

    async def loop() -> None:
        delay = secrets.SystemRandom().uniform(0.0, interval.total_seconds())
        while True:
            await asyncio.sleep(delay)
            delay = interval.total_seconds()
            try:
                await backend.artifacts.scrub(grace)
            except Exception as exc:  # noqa: BLE001 - next interval; its text could name keys
                log.warning("artifact scrub failed", extra={"error_type": type(exc).__name__})

    return asyncio.get_running_loop().create_task(loop())


def start_tool_call_sweeper(backend: Backend) -> asyncio.Task[None]:
    """Drops the staged effects of tool calls past their deadline with no
    response (every TOOL_SWEEP_S), and purges closed rows a day old."""

    async def sweep() -> None:
        while await backend.tool_calls.drop_expired(limit=TOOL_SWEEP_BATCH) == TOOL_SWEEP_BATCH:
            pass
        await backend.tool_calls.purge(dt.timedelta(days=1))

    return _every(TOOL_SWEEP_S, sweep, "tool call sweep failed")


def _every(interval_s: float, work: Callable[[], Awaitable[object]], failure: str) -> asyncio.Task[None]:
    async def loop() -> None:
        while True:
            try:
                await work()
            except Exception:
                log.warning(failure, exc_info=True)
            await asyncio.sleep(interval_s)

    return asyncio.get_running_loop().create_task(loop())


def check_client_files(settings: ContextSettings) -> None:
    """The client certificates this service presents to the cache service and
    to remote compactors, checked at start (ConfigError naming the setting):
    gRPC reads them only at the first call, which would fail INTERNAL."""
    if settings.cache_ca is not None:
        channel_credentials(settings.cache_ca, settings.cache_cert, settings.cache_key,
                            names=("cache_ca", "cache_cert", "cache_key"))
    if settings.remote_compactor_ca is not None:
        channel_credentials(settings.remote_compactor_ca, settings.remote_compactor_cert, settings.remote_compactor_key,
                            names=("remote_compactor_ca", "remote_compactor_cert", "remote_compactor_key"))


def compose(settings: ContextSettings, backend: Backend, cache: CacheClient) -> tuple[ContextApp, CompactionRuntime]:
    """The application services on ``backend`` and ``cache``; compaction's
    worker starts here (when enabled)."""
    defaults = session_defaults(settings)
    compaction = start_compaction(
        settings, sessions=backend.sessions, compactions=backend.compactions, jobs=backend.jobs,
        defaults=defaults, cache=cache,
    )
    history = HistoryCache(backend.sessions, render)
    tail = TailReader(backend.sessions, render)
    # Appends through the application extend the history caches (no read after).
    sessions = ObservedSessions(backend.sessions, history, tail)
    memory = MemoryService(backend.memory, sessions, semantic=semantic_memory(settings), embeddings=cache,
                           embed_timeout_s=settings.memory_embedding_timeout_s)
    builder = ContextBuilder(
        heads=backend.heads,
        history=history,
        render=render,
        limits=limits_of(settings),
        effective_config=functools.partial(overlay, defaults),
        compressors=compaction.service,
        tail=tail,
        retriever=memory,
        attachments=AttachmentLoader(backend.artifacts, render),
    )
    tools = tool_contexts(settings, backend)
    turns = TurnRunner(sessions=sessions, builder=builder, compaction=compaction.service, cache=cache, tools=tools)
    app = ContextApp(
        settings=settings, defaults=defaults, sessions=sessions, lifecycle=backend.lifecycle,
        builder=builder, compaction=compaction.service, cache=cache, turns=turns, artifacts=backend.artifacts,
        memory=memory,
        tools=tools,
    )
    return app, compaction


def semantic_memory(settings: ContextSettings) -> SemanticMemory | None:
    """Semantic memory as the settings configure it (None: lexical only)."""
    if not settings.memory_embedding_model:
        return None
    return SemanticMemory(settings.memory_embedding_model, settings.memory_embedding_provider,
                          settings.memory_embedding_dimensions or None)


def tool_contexts(settings: ContextSettings, backend: Backend) -> ToolContexts:
    keys = [SigningKey(k.id, k.secret.get_secret_value().encode()) for k in settings.tool_token_keys]
    active = settings.active_tool_token_key_id or (keys[0].key_id if keys else None)
    return ToolContexts(ToolTokenCodec(KeySet(keys, active)), backend.tool_calls, ttl_s=settings.tool_token_ttl_s)


async def build_server(settings: ContextSettings) -> GrpcServer:
    check_client_files(settings)
    # Refuses (ConfigError) a database whose schema is not this code's.
    backend = await open_backend(settings)
    cache = CacheClient(settings)
    try:
        app, compaction = compose(settings, backend, cache)
    except BaseException:
        await backend.close()
        raise
    servicer = ContextServicer(app)
    artifacts = ArtifactServicer(app)
    try:
        server = new_server(
            settings,
            service_names=[SERVICE_NAME, ARTIFACT_SERVICE_NAME, MEMORY_SERVICE_NAME, TOOL_CONTEXT_SERVICE_NAME],
            register=lambda s: register_servicer(s, servicer, artifacts),
            telemetry_name="context-service",
        )
    except BaseException:
        await compaction.close()
        await backend.close()
        raise
    # Closers run in reverse: compaction's worker and channels stop before
    # the cache client and the store close.
    server.closers.append(backend.close)
    server.closers.append(cache.close)
    server.closers.append(compaction.close)
    collectors = [
        start_upload_collector(backend, dt.timedelta(seconds=settings.artifact_upload_grace_s)),
        start_tool_call_sweeper(backend),
    ]
    if settings.artifact_scrub_interval_s > 0:
        collectors.append(start_artifact_scrubber(backend, dt.timedelta(seconds=settings.artifact_scrub_interval_s),
                                                  dt.timedelta(seconds=settings.artifact_scrub_grace_s)))

    async def stop_collector() -> None:
        for collector in collectors:
            collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await collector

    server.closers.append(stop_collector)
    return server


async def serve(settings: ContextSettings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    configure_telemetry("agentctx-context", settings.telemetry_exporter, settings.otlp_config())
    server = await build_server(settings)
    await serve_until_signal(server, settings.shutdown_grace_s)


def main() -> None:
    asyncio.run(serve(ContextSettings.load()))
