"""gRPC server bootstrap shared by both services: options, TLS binding,
health, reflection, interceptors and graceful shutdown.

Each service's ``build_server(settings)`` returns a ``GrpcServer`` that is
bound but not started; ``serve()`` starts it and waits for SIGTERM/SIGINT.
Tests build servers on 127.0.0.1:0 and stop them directly.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from agentctx_common.errors import ConfigError
from agentctx_common.load_shedding import AdmissionInterceptor, limits_from
from agentctx_common.memory import tune_malloc
from agentctx_common.settings import ServerSettings
from agentctx_common.status import ChainInterceptor, ErrorInterceptor, WrappingInterceptor
from agentctx_common.telemetry import TracingInterceptor, shutdown_telemetry
from agentctx_common.tls import server_credentials

log = logging.getLogger("agentctx.server")

Closer = Callable[[], Awaitable[None]]

# Set in the workers of ``agentctx serve --workers N`` (``share_port``): they
# bind one port together (SO_REUSEPORT), which is refused otherwise.
_share_port = False


def share_port() -> None:
    """Servers built in this process from now on bind their port with
    SO_REUSEPORT, next to the other workers of a supervisor."""
    global _share_port
    _share_port = True


@dataclass
class GrpcServer:
    """A bound gRPC server and what must happen when it stops."""

    server: grpc.aio.Server
    port: int
    host: str
    service_names: tuple[str, ...]
    health: health_aio.HealthServicer
    closers: list[Closer] = field(default_factory=list)
    _stopped: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        await self.server.start()
        for name in ("", *self.service_names):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("serving", extra={"address": self.address, "services": ",".join(self.service_names)})

    async def stop(self, grace: float | None = 5.0) -> None:
        """Health NOT_SERVING, drain in-flight RPCs for ``grace`` seconds,
        then close resources (database, channels, workers) in reverse order."""
        if self._stopped:
            return
        self._stopped = True
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        for closer in reversed(self.closers):
            try:
                await closer()
            except Exception as exc:  # noqa: BLE001 - keep closing the rest
                log.error("close failed", extra={"error_type": type(exc).__name__})
        log.info("stopped", extra={"address": self.address})


def new_server(
    settings: ServerSettings,
    *,
    service_names: Sequence[str],
    register: Callable[[grpc.aio.Server], None],
    interceptors: Sequence[WrappingInterceptor] = (),
    telemetry_name: str,
) -> GrpcServer:
    """Creates and binds a server with health, reflection and the standard
    interceptors (tracing outermost, then ``interceptors``, then errors)."""
    creds = None
    if not settings.dev_plaintext:
        assert settings.tls_cert is not None and settings.tls_key is not None
        # Checked here (ConfigError naming the file): gRPC reports a bad
        # certificate or key only as a failure to bind.
        creds = server_credentials(settings.tls_cert, settings.tls_key, settings.tls_client_ca, settings.require_client_cert)
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.keepalive_time_ms", int(settings.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_s * 1000)),
        ("grpc.http2.min_ping_interval_without_data_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Without this a second server could silently share a busy port;
        # only a supervisor's workers share one on purpose.
        ("grpc.so_reuseport", 1 if _share_port else 0),
        # gRPC cancels (bare CANCELLED) a call the application has not taken
        # up within this time (30 s by default); under load the event loop
        # takes calls up slowly. A waiting call ends instead at its own
        # deadline or when admission control serves or refuses it.
        ("grpc.server_max_unrequested_time_in_server", settings.max_unrequested_time_s),
        # Bound what the transport reads ahead of admission: a fixed stream
        # window (no BDP probing to grow it), so many large requests wait in
        # their clients' buffers instead of this process's.
        ("grpc.http2.bdp_probe", 1 if settings.http2_bdp_probe else 0),
        ("grpc.http2.lookahead_bytes", settings.http2_stream_window_bytes),
    ]
    if settings.max_streams_per_connection:
        options.append(("grpc.max_concurrent_streams", settings.max_streams_per_connection))
    tune_malloc()
    admission = AdmissionInterceptor(limits_from(settings))
    server = grpc.aio.server(
        interceptors=[
            ChainInterceptor([TracingInterceptor(telemetry_name), admission, *interceptors, ErrorInterceptor()])
        ],
        options=options,
    )
    register(server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        [*service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
        server,
    )
    address = f"{settings.host}:{settings.port}"
    try:
        port = server.add_insecure_port(address) if creds is None else server.add_secure_port(address, creds)
    except RuntimeError:
        raise ConfigError(f"cannot listen on {address}: the address is in use or not available") from None
    if port == 0:
        raise ConfigError(f"cannot listen on {address}")
    return GrpcServer(server, port, settings.host, tuple(service_names), health)


async def serve_until_signal(server: GrpcServer, grace: float, on_ready: Callable[[GrpcServer], None] | None = None) -> None:
    """Starts ``server`` and stops it gracefully on SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
        if on_ready:
            on_ready(server)
        await stop.wait()
        log.info("shutting down", extra={"address": server.address})
    finally:
        await server.stop(grace)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        # Export what is still queued (the last turn's spans) before the process ends.
        await asyncio.to_thread(shutdown_telemetry)
