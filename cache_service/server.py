"""Cache service entry points: ``build_server`` (bound, not started) and
``serve`` (runs until SIGTERM/SIGINT)."""

from __future__ import annotations

import asyncio

from agentctx.cache.v1 import cache_service_pb2
from agentctx_common.auth import AllowlistInterceptor
from agentctx_common.logs import configure_logging
from agentctx_common.server import GrpcServer, new_server, serve_until_signal
from agentctx_common.telemetry import configure_telemetry
from cache_service.api.servicer import CacheServicer, register
from cache_service.app import CacheApp
from cache_service.providers.factory import build_router
from cache_service.settings import CacheSettings

SERVICE_NAME = cache_service_pb2.DESCRIPTOR.services_by_name["CacheService"].full_name


async def build_server(settings: CacheSettings, *, app: CacheApp | None = None) -> GrpcServer:
    """A bound server. Its background work (cleanup workers, the expiry
    sweeper and journal recovery) starts here; ``server.stop()`` ends it and
    closes the providers and the journal. Tests may pass their own ``app``
    (for example with a manual clock or an instrumented provider)."""
    app = app or await CacheApp.create(settings)
    servicer = CacheServicer(app, build_router(app.settings, app.providers))
    try:
        server = new_server(
            settings,
            service_names=[SERVICE_NAME],
            register=lambda s: register(servicer, s),
            interceptors=[AllowlistInterceptor(settings.allowed_identities)],
            telemetry_name="cache-service",
        )
    except BaseException:
        await app.close()
        raise
    server.closers.append(app.close)
    app.start()
    return server


async def serve(settings: CacheSettings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    configure_telemetry("agentctx-cache", settings.telemetry_exporter, settings.otlp_config())
    server = await build_server(settings)
    await serve_until_signal(server, settings.shutdown_grace_s)


def main() -> None:
    asyncio.run(serve(CacheSettings.load()))
