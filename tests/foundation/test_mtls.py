"""The cache service accepts mTLS only, and only allowlisted identities; the
context service serves TLS to agents. Real servers on 127.0.0.1:0."""

from __future__ import annotations

import pathlib

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.cache.v1 import cache_service_pb2, cache_service_pb2_grpc
from agentctx_common.certs import init_dev_certs
from agentctx_common.status import error_from_rpc
from tests.support.servers import (
    cache_settings,
    context_settings,
    secure_channel,
    start_cache,
    start_context,
)


@pytest.fixture
async def cache_server(certs_dir: pathlib.Path, tmp_path: pathlib.Path):
    server = await start_cache(cache_settings(certs_dir, tmp_path))
    yield server
    await server.stop(0)


@pytest.fixture(scope="session")
def other_ca_certs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A different CA issuing certificates with the same identities."""
    directory = tmp_path_factory.mktemp("other-ca")
    init_dev_certs(directory)
    return directory


def _scope_status_request() -> cache_service_pb2.GetScopeStatusRequest:
    return cache_service_pb2.GetScopeStatusRequest(
        scope=cache_service_pb2.CacheScope(app="a", user="u", model="local-sim-1")
    )


async def _call_cache(channel: grpc.aio.Channel) -> None:
    await cache_service_pb2_grpc.CacheServiceStub(channel).GetScopeStatus(_scope_status_request(), timeout=5)


async def test_cache_service_refuses_a_caller_without_certificate(cache_server, certs_dir) -> None:
    async with secure_channel(cache_server.port, certs_dir, client=None) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _call_cache(channel)
    # Refused at the handshake: the call never reaches the service.
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_cache_service_refuses_a_certificate_from_another_ca(cache_server, certs_dir, other_ca_certs) -> None:
    from agentctx_common.tls import channel_credentials

    creds = channel_credentials(
        certs_dir / "ca.pem", other_ca_certs / "context-client.pem", other_ca_certs / "context-client.key"
    )
    async with grpc.aio.secure_channel(
        f"127.0.0.1:{cache_server.port}", creds, options=[("grpc.ssl_target_name_override", "localhost")]
    ) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _call_cache(channel)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_cache_service_denies_an_identity_not_on_its_allowlist(cache_server, certs_dir) -> None:
    async with secure_channel(cache_server.port, certs_dir, client="agent-client") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _call_cache(channel)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_from_rpc(caught.value).reason == "IDENTITY_NOT_ALLOWED"


async def test_cache_service_admits_the_context_service_identity(cache_server, certs_dir) -> None:
    async with secure_channel(cache_server.port, certs_dir, client="context-client") as channel:
        try:
            await _call_cache(channel)
        except grpc.aio.AioRpcError as exc:
            # Past the allowlist the call reaches the servicer; any answer
            # but an authentication or authorization failure proves it.
            assert exc.code() not in (
                grpc.StatusCode.UNAUTHENTICATED,
                grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.UNAVAILABLE,
            ), exc


async def test_cache_service_health_is_open_to_any_verified_caller(cache_server, certs_dir) -> None:
    async with secure_channel(cache_server.port, certs_dir, client="agent-client") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_context_service_serves_tls_without_client_certificate(certs_dir, tmp_path) -> None:
    server = await start_context(context_settings(certs_dir, tmp_path))
    try:
        async with secure_channel(server.port, certs_dir, client=None) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        # A plaintext client cannot talk to the TLS port.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0)


async def test_context_service_can_require_client_certificates(certs_dir, tmp_path) -> None:
    server = await start_context(context_settings(certs_dir, tmp_path, require_client_cert=True))
    try:
        async with secure_channel(server.port, certs_dir, client=None) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        async with secure_channel(server.port, certs_dir, client="agent-client") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await server.stop(0)


async def _list_services(channel: grpc.aio.Channel) -> list[str]:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    names: list[str] = []
    async for reply in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                                 timeout=5):
        names += [s.name for s in reply.list_services_response.service]
    return names


async def test_cache_service_reflection_follows_the_allowlist(cache_server, certs_dir) -> None:
    """The README: the cache service answers only the context service. Its
    schema too; health stays open for probes (above)."""
    async with secure_channel(cache_server.port, certs_dir, client="agent-client") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _list_services(channel)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_from_rpc(caught.value).reason == "IDENTITY_NOT_ALLOWED"
    async with secure_channel(cache_server.port, certs_dir, client="context-client") as channel:
        assert "agentctx.cache.v1.CacheService" in await _list_services(channel)
