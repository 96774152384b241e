"""Per-app authorization: client-certificate identities on an mTLS port,
bearer tokens on a TLS port, anonymous access on loopback only when
configured. Another app's sessions are PERMISSION_DENIED on every RPC and
never listed."""

from __future__ import annotations

import hashlib
import pathlib

import grpc
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.x509 import load_pem_x509_certificate
from google.protobuf import field_mask_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, session_pb2, tool_context_pb2
from agentctx_common.certs import CONTEXT_SERVICE_ID, SAMPLE_AGENT_ID, Leaf, issue
from agentctx_common.errors import ConfigError, PermissionDenied, Unauthenticated
from context_service.authz import Authorizer, TokenGrant
from context_service.settings import ContextSettings
from tests.sessions.helpers import append_request, pb_text_event, rpc_error
from tests.support.servers import secure_channel

SHOP = "apps/shop/users/alice"
OTHER = "apps/other/users/alice"
TOKEN = "s3cr3t-token-for-ci"
STRANGER_ID = "spiffe://agentctx.local/agent/stranger"


def _every_rpc(parent: str) -> dict[str, object]:
    name = f"{parent}/sessions/s1"
    return {
        "CreateSession": pb.CreateSessionRequest(parent=parent, session_id="s1"),
        "GetSession": pb.GetSessionRequest(name=name),
        "ListSessions": pb.ListSessionsRequest(parent=parent),
        "UpdateSession": pb.UpdateSessionRequest(
            session=session_pb2.Session(name=name), update_mask=field_mask_pb2.FieldMask(paths=["state"])
        ),
        "AppendEvent": append_request(name, pb_text_event("e1")),
        "BatchAppendEvents": pb.BatchAppendEventsRequest(parent=name, events=[pb_text_event("e2")]),
        "ListEvents": pb.ListEventsRequest(parent=name),
        "MintToolTokens": tool_context_pb2.MintToolTokensRequest(session=name, event_id="e1"),
        "DeleteSession": pb.DeleteSessionRequest(name=name),
    }


@pytest.fixture(scope="module")
def stranger_certs(certs_dir: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The dev CA's certificates plus one for an identity nobody granted."""
    directory = tmp_path_factory.mktemp("stranger")
    for name in ("ca.pem", "agent-client.pem", "agent-client.key"):
        (directory / name).write_bytes((certs_dir / name).read_bytes())
    ca = load_pem_x509_certificate((certs_dir / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((certs_dir / "ca.key").read_bytes(), password=None)
    cert, key = issue(ca, ca_key, Leaf("stranger", STRANGER_ID, server=False, client=True))  # type: ignore[arg-type]
    (directory / "stranger.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "stranger.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return directory


@pytest.fixture
async def mtls_server(server_factory):  # type: ignore[no-untyped-def]
    """mTLS: the sample agent may use "shop", the context-service identity
    "other"; nobody is anonymous."""
    return await server_factory(
        require_client_cert=True, dev_anonymous_apps=[],
        app_grants={SAMPLE_AGENT_ID: ["shop"], CONTEXT_SERVICE_ID: ["other"]},
    )


async def test_another_apps_sessions_are_denied_on_every_rpc(mtls_server, certs_dir) -> None:  # type: ignore[no-untyped-def]
    async with secure_channel(mtls_server.port, certs_dir, "context-client") as channel:
        owner = context_service_pb2_grpc.ContextServiceStub(channel)
        await owner.CreateSession(pb.CreateSessionRequest(parent=OTHER, session_id="s1"))
    async with secure_channel(mtls_server.port, certs_dir, "agent-client") as channel:
        agent = context_service_pb2_grpc.ContextServiceStub(channel)
        for method, request in _every_rpc(OTHER).items():
            err = await rpc_error(getattr(agent, method)(request))
            assert isinstance(err, PermissionDenied), method
            assert (err.reason, err.metadata) == ("APP_NOT_ALLOWED", {"app": "other"}), method
        # Its own app works, for every RPC.
        for method, request in _every_rpc(SHOP).items():
            await getattr(agent, method)(request)
    async with secure_channel(mtls_server.port, certs_dir, "context-client") as channel:
        owner = context_service_pb2_grpc.ContextServiceStub(channel)
        # The denied calls changed nothing.
        got = await owner.GetSession(pb.GetSessionRequest(name=f"{OTHER}/sessions/s1"))
        assert got.last_sequence == 0


async def test_listings_show_only_allowed_apps(mtls_server, certs_dir) -> None:  # type: ignore[no-untyped-def]
    async with secure_channel(mtls_server.port, certs_dir, "context-client") as channel:
        other = context_service_pb2_grpc.ContextServiceStub(channel)
        await other.CreateSession(pb.CreateSessionRequest(parent=OTHER, session_id="o1"))
    async with secure_channel(mtls_server.port, certs_dir, "agent-client") as channel:
        agent = context_service_pb2_grpc.ContextServiceStub(channel)
        await agent.CreateSession(pb.CreateSessionRequest(parent=SHOP, session_id="a1"))
        listed = await agent.ListSessions(pb.ListSessionsRequest(parent="apps/-/users/-"))
        assert [s.name for s in listed.sessions] == [f"{SHOP}/sessions/a1"]
        listed = await agent.ListSessions(pb.ListSessionsRequest(parent="apps/-/users/alice"))
        assert [s.name for s in listed.sessions] == [f"{SHOP}/sessions/a1"]
        err = await rpc_error(agent.ListSessions(pb.ListSessionsRequest(parent="apps/other/users/-")))
        assert err.reason == "APP_NOT_ALLOWED"


async def test_an_identity_without_grants_is_denied(mtls_server, stranger_certs) -> None:  # type: ignore[no-untyped-def]
    async with secure_channel(mtls_server.port, stranger_certs, "stranger") as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        err = await rpc_error(stub.ListSessions(pb.ListSessionsRequest(parent="apps/-/users/-")))
    assert (err.code.value, err.reason) == ("PERMISSION_DENIED", "IDENTITY_NOT_ALLOWED")


@pytest.fixture
async def token_server(server_factory):  # type: ignore[no-untyped-def]
    """TLS without client certificates: callers authenticate with a token."""
    grant = {"name": "ci", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "apps": ["shop"]}
    return await server_factory(dev_anonymous_apps=[], bearer_tokens=[grant])


@pytest.mark.parametrize(("metadata", "reason"), [
    ((), "NO_CALLER_IDENTITY"),
    ((("authorization", "Bearer wrong-token"),), "INVALID_BEARER_TOKEN"),
    ((("authorization", f"Basic {TOKEN}"),), "INVALID_AUTHORIZATION"),
])
async def test_no_valid_identity_is_unauthenticated(token_server, certs_dir, metadata, reason) -> None:  # type: ignore[no-untyped-def]
    # The client certificate is not even requested on this port.
    async with secure_channel(token_server.port, certs_dir, "agent-client") as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        for method, request in _every_rpc(SHOP).items():
            err = await rpc_error(getattr(stub, method)(request, metadata=metadata))
            assert isinstance(err, Unauthenticated), method
            assert err.reason == reason


async def test_a_bearer_token_grants_its_apps(token_server, certs_dir) -> None:  # type: ignore[no-untyped-def]
    auth = (("authorization", f"Bearer {TOKEN}"),)
    async with secure_channel(token_server.port, certs_dir, client=None) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        created = await stub.CreateSession(pb.CreateSessionRequest(parent=SHOP), metadata=auth)
        assert created.name.startswith(SHOP)
        err = await rpc_error(stub.CreateSession(pb.CreateSessionRequest(parent=OTHER), metadata=auth))
        assert err.reason == "APP_NOT_ALLOWED"


async def test_anonymous_access_on_plaintext_loopback(db_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.sessions.helpers import migrate
    from tests.support.servers import start_context

    await migrate(db_url)
    settings = ContextSettings(dev_plaintext=True, host="127.0.0.1", port=0, database_url=db_url,
                               data_dir=tmp_path, dev_anonymous_apps=["demo"], log_format="text")
    server = await start_context(settings)
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = context_service_pb2_grpc.ContextServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(parent="apps/demo/users/u"))
            err = await rpc_error(stub.CreateSession(pb.CreateSessionRequest(parent=SHOP)))
            assert err.reason == "APP_NOT_ALLOWED"
    finally:
        await server.stop(0)


def test_authorization_settings_are_checked(tmp_path: pathlib.Path) -> None:
    base = {"data_dir": tmp_path}
    with pytest.raises(ConfigError, match="loopback"):
        ContextSettings.load(dev_plaintext=False, host="0.0.0.0", tls_cert=tmp_path / "c", tls_key=tmp_path / "k",
                             dev_anonymous_apps=["x"], **base)
    with pytest.raises(ConfigError, match="empty"):
        ContextSettings.load(dev_plaintext=True, app_grants={"spiffe://x": []}, **base)
    with pytest.raises(ConfigError, match="sha256"):
        ContextSettings.load(dev_plaintext=True, bearer_tokens=[{"name": "t", "sha256": "abc", "apps": ["a"]}], **base)
    with pytest.raises(ConfigError, match="session_defaults"):
        ContextSettings.load(dev_plaintext=True, session_defaults={"selection": {"max_bytez": 1}}, **base)
    with pytest.raises(ConfigError, match="id_pattern"):
        ContextSettings.load(dev_plaintext=True, id_pattern="([", **base)


def test_authorizer_rules() -> None:
    authz = Authorizer(
        {"spiffe://a": ["x"], "spiffe://b": ["y"], "spiffe://admin": ["*"]},
        [TokenGrant("ci", hashlib.sha256(b"t").hexdigest(), frozenset({"z"}))],
    )
    both = authz.authenticate(frozenset({"spiffe://a", "spiffe://b", "dns:unknown"}), None)
    assert both.apps == {"x", "y"} and both.identity == "spiffe://a,spiffe://b"
    assert both.visible_apps(None) == {"x", "y"}
    admin = authz.authenticate(frozenset({"spiffe://admin"}), None)
    assert admin.may_use("anything") and admin.visible_apps(None) is None
    token = authz.authenticate(frozenset({"spiffe://admin"}), "bearer t")  # a token, when sent, decides
    assert (token.identity, token.apps) == ("token:ci", {"z"})
    with pytest.raises(PermissionDenied):
        token.require("x")
    with pytest.raises(Unauthenticated):
        authz.authenticate(frozenset(), None)
