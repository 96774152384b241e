"""Real servers on 127.0.0.1:0 and the channels that reach them."""

from __future__ import annotations

import pathlib
from typing import Any

import grpc

from agentctx_common.certs import SAMPLE_AGENT_ID
from agentctx_common.server import GrpcServer
from agentctx_common.tls import channel_credentials
from cache_service.server import build_server as build_cache_server
from cache_service.settings import CacheSettings
from context_service.server import build_server as build_context_server
from context_service.settings import ContextSettings


def cache_settings(certs: pathlib.Path, tmp: pathlib.Path, **overrides: Any) -> CacheSettings:
    values: dict[str, Any] = dict(
        host="127.0.0.1",
        port=0,
        tls_cert=certs / "cache-server.pem",
        tls_key=certs / "cache-server.key",
        tls_client_ca=certs / "ca.pem",
        data_dir=tmp / "cache-data",
        log_format="text",
    )
    values.update(overrides)
    return CacheSettings(**values)


def context_settings(certs: pathlib.Path, tmp: pathlib.Path, **overrides: Any) -> ContextSettings:
    values: dict[str, Any] = dict(
        host="127.0.0.1",
        port=0,
        tls_cert=certs / "context-server.pem",
        tls_key=certs / "context-server.key",
        data_dir=tmp / "context-data",
        cache_ca=certs / "ca.pem",
        cache_cert=certs / "context-client.pem",
        cache_key=certs / "context-client.key",
        log_format="text",
        # Without require_client_cert no certificate is requested: callers are anonymous.
        dev_anonymous_apps=["*"],
    )
    values.update(overrides)
    if values.get("require_client_cert"):
        values.setdefault("tls_client_ca", certs / "ca.pem")
        values.setdefault("app_grants", {SAMPLE_AGENT_ID: ["*"]})
    return ContextSettings(**values)


async def start_cache(settings: CacheSettings) -> GrpcServer:
    server = await build_cache_server(settings)
    await server.start()
    return server


async def start_context(settings: ContextSettings) -> GrpcServer:
    server = await build_context_server(settings)
    await server.start()
    return server


def secure_channel(port: int, certs: pathlib.Path, client: str | None = "agent-client") -> grpc.aio.Channel:
    """An aio channel to 127.0.0.1:port trusting the dev CA; with ``client``,
    presenting that dev client certificate (mTLS)."""
    creds = channel_credentials(
        certs / "ca.pem",
        certs / f"{client}.pem" if client else None,
        certs / f"{client}.key" if client else None,
    )
    return grpc.aio.secure_channel(
        f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "localhost")]
    )
