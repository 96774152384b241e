"""Context service entry points: ``build_server`` (bound, not started) and
``serve`` (runs until SIGTERM/SIGINT)."""

from __future__ import annotations

import asyncio

import grpc

from agentctx.context.v1 import context_service_pb2, context_service_pb2_grpc
from agentctx_common.logs import configure_logging
from agentctx_common.server import GrpcServer, new_server, serve_until_signal
from agentctx_common.telemetry import configure_telemetry
from agentctx_common.tls import channel_credentials
from context_service.api.selection_rpcs import register_raw_build_context
from context_service.api.servicer import ContextServicer
from context_service.app import ContextApp
from context_service.cache_client import CacheClient
from context_service.compaction.runtime import start_compaction
from context_service.settings import ContextSettings
from context_service.storage.sql_store import open_from_settings

SERVICE_NAME = context_service_pb2.DESCRIPTOR.services_by_name["ContextService"].full_name


def register_servicer(server: grpc.aio.Server, servicer: ContextServicer) -> None:
    context_service_pb2_grpc.add_ContextServiceServicer_to_server(servicer, server)
    register_raw_build_context(server, servicer)


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


async def build_server(settings: ContextSettings) -> GrpcServer:
    check_client_files(settings)
    # Refuses (ConfigError) a database whose schema is not this code's.
    store = await open_from_settings(settings)
    app = ContextApp(settings=settings, store=store)
    servicer = ContextServicer(app)
    try:
        server = new_server(
            settings,
            service_names=[SERVICE_NAME],
            register=lambda s: register_servicer(s, servicer),
            telemetry_name="context-service",
        )
    except BaseException:
        await store.close()
        raise
    server.closers.append(store.close)
    server.closers.append(app.history.close)
    # Closers run in reverse: compaction's worker and channels stop before the store closes.
    app.cache_client = CacheClient(settings)
    compaction = start_compaction(settings, store, app.session_defaults, cache=app.cache_client)
    app.compaction_service = compaction.service
    server.closers.append(compaction.close)
    return server


async def serve(settings: ContextSettings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    configure_telemetry("agentctx-context", settings.telemetry_exporter, settings.otlp_config())
    server = await build_server(settings)
    await serve_until_signal(server, settings.shutdown_grace_s)


def main() -> None:
    asyncio.run(serve(ContextSettings.load()))
