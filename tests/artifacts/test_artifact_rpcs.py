"""ArtifactService on a real server (each backend), through the Python
client: round trips (text, bytes, a 5 MiB multi-chunk stream), versions and
the latest, "user:" artifacts across sessions, session deletion, the size
limit and the quota, bad ids, content addressing, per-app authorization,
health and reflection, and content-free spans."""

from __future__ import annotations

import hashlib
import pathlib

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentctx.context.v1 import artifacts_pb2 as apb
from agentctx.context.v1 import artifacts_pb2_grpc
from agentctx_client import (
    ContextClient,
    InvalidArgumentError,
    NotFoundError,
    Part,
    PermissionDeniedError,
    ResourceExhaustedError,
    user_parent,
)
from agentctx_common.certs import CONTEXT_SERVICE_ID, SAMPLE_AGENT_ID
from context_service.storage.artifacts import SqlArtifactStore
from context_service.storage.sql_store import open_store
from tests.artifacts.conftest import ServerFactory, client_of
from tests.support.spans import span_exporter

S1 = "apps/shop/users/alice/sessions/s1"
S2 = "apps/shop/users/alice/sessions/s2"
ALICE = user_parent("shop", "alice")
MIB = 1024 * 1024


async def test_round_trips_versions_and_latest(client: ContextClient) -> None:
    v0 = await client.save_artifact(S1, "notes.md", "hello, wörld", custom_metadata={"by": "tool"})
    assert (v0.version, v0.text, v0.mime_type, v0.size_bytes) == (0, True, "text/plain", len("hello, wörld".encode()))
    assert v0.sha256 == hashlib.sha256("hello, wörld".encode()).hexdigest()
    v1 = await client.save_artifact(S1, "notes.md", "second")
    assert v1.version == 1
    latest = await client.load_artifact(S1, "notes.md")
    assert (latest.version.version, latest.text) == (1, "second")
    first = await client.load_artifact(S1, "notes.md", version=0)
    assert first.text == "hello, wörld" and first.part.text == "hello, wörld"
    assert first.version.custom_metadata == {"by": "tool"}

    png = bytes(range(256)) * 10
    saved = await client.save_artifact(S1, "img/chart.png", png, mime_type="image/png")
    loaded = await client.load_artifact(S1, "img/chart.png")
    assert loaded.data == png and loaded.part.proto is not None
    assert (loaded.part.proto.inline_data.mime_type, loaded.part.proto.inline_data.data) == ("image/png", png)
    assert saved.mime_type == "image/png" and not saved.text

    versions = await client.list_artifact_versions(S1, "notes.md")
    assert [(v.version, v.size_bytes) for v in versions] == [(0, 13), (1, 6)]
    assert all(v.create_time is not None for v in versions)
    assert await client.list_artifacts(S1) == ["img/chart.png", "notes.md"]

    with pytest.raises(NotFoundError) as missing:
        await client.load_artifact(S1, "notes.md", version=9)
    assert missing.value.reason_name == "ARTIFACT_NOT_FOUND"
    assert await client.delete_artifact(S1, "notes.md", version=1) == 1
    assert (await client.load_artifact(S1, "notes.md")).text == "hello, wörld"
    assert await client.delete_artifact(S1, "notes.md") == 1
    assert await client.list_artifacts(S1) == ["img/chart.png"]
    assert await client.delete_artifact(S1, "notes.md") == 0


async def test_five_mib_streams_in_many_chunks(client: ContextClient) -> None:
    data = hashlib.sha256(b"seed").digest() * (5 * MIB // 32) + b"end"

    async def pieces():  # type: ignore[no-untyped-def]
        for i in range(0, len(data), 200_000):
            yield data[i:i + 200_000]

    saved = await client.save_artifact(S1, "big.bin", pieces())
    assert (saved.size_bytes, saved.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    meta, chunks = await client.open_artifact(S1, "big.bin")
    received = [chunk async for chunk in chunks]
    assert meta.size_bytes == len(data)
    assert len(received) == 6 and max(map(len, received)) <= MIB
    assert b"".join(received) == data
    # A Part with inline data in one message, chunked by the client.
    part = Part(proto=apb.SaveArtifactHeader().part.__class__(
        inline_data={"mime_type": "application/pdf", "data": data[: 2 * MIB]}))
    again = await client.save_artifact(S1, "doc.pdf", part, chunk_bytes=MIB // 2)
    assert again.mime_type == "application/pdf"
    assert (await client.load_artifact(S1, "doc.pdf")).data == data[: 2 * MIB]


async def test_user_artifacts_span_sessions_and_outlive_them(client: ContextClient) -> None:
    session = await client.create_session("shop", "alice", session_id="s1")
    await client.save_artifact(S1, "draft.txt", "session only")
    await client.save_artifact(S1, "user:profile.json", b'{"tz": "CET"}', mime_type="application/json")
    assert (await client.load_artifact(S2, "user:profile.json")).data == b'{"tz": "CET"}'
    assert (await client.load_artifact(ALICE, "user:profile.json")).version.parent == ALICE
    assert await client.save_artifact(S2, "user:profile.json", b"{}") is not None
    assert [v.version for v in await client.list_artifact_versions(ALICE, "user:profile.json")] == [0, 1]
    assert await client.list_artifacts(S2) == ["user:profile.json"]
    assert await client.list_artifacts(ALICE) == ["user:profile.json"]
    with pytest.raises(NotFoundError):
        await client.load_artifact(S2, "draft.txt")

    await client.delete_session(session.name)
    assert await client.list_artifacts(S1) == ["user:profile.json"]
    with pytest.raises(NotFoundError):
        await client.load_artifact(S1, "draft.txt")
    assert (await client.load_artifact(ALICE, "user:profile.json")).data == b"{}"


async def test_over_the_size_limit_is_resource_exhausted(server_factory: ServerFactory,
                                                         certs_dir: pathlib.Path) -> None:
    server = await server_factory(max_artifact_bytes=MIB)
    async with client_of(server, certs_dir) as client:
        await client.save_artifact(S1, "fits", b"x" * MIB)
        with pytest.raises(ResourceExhaustedError) as large:
            await client.save_artifact(S1, "too.big", b"x" * (MIB + 1), chunk_bytes=MIB // 4)
        assert large.value.reason_name == "ARTIFACT_TOO_LARGE"
        assert large.value.metadata["max_artifact_bytes"] == str(MIB)
        # Refused while the client still streams: the status still reaches it (never INTERNAL).
        with pytest.raises(ResourceExhaustedError) as midway:
            await client.save_artifact(S1, "too.big", b"x" * (8 * MIB), chunk_bytes=MIB // 4)
        assert midway.value.reason_name == "ARTIFACT_TOO_LARGE"
        assert await client.list_artifacts(S1) == ["fits"]


async def test_quota_per_app(server_factory: ServerFactory, certs_dir: pathlib.Path) -> None:
    server = await server_factory(artifact_quota_bytes_per_app=1000)
    async with client_of(server, certs_dir) as client:
        await client.save_artifact(S1, "a", b"a" * 600)
        await client.save_artifact(S2, "b", b"a" * 600)  # the same bytes: stored once, free
        with pytest.raises(ResourceExhaustedError) as over:
            await client.save_artifact(S1, "c", b"c" * 401)
        assert over.value.reason_name == "ARTIFACT_QUOTA_EXCEEDED"
        assert over.value.metadata == {"quota_bytes": "1000", "used_bytes": "600", "requested_bytes": "401"}
        await client.save_artifact("apps/other/users/bob/sessions/s", "c", b"c" * 401)


@pytest.mark.parametrize(("parent", "artifact", "field"), [
    (S1, "../etc/passwd", "header.artifact"),
    (S1, "a/./b", "header.artifact"),
    (S1, "bell\x07", "header.artifact"),
    (S1, "x" * 513, "header.artifact"),
    (S1, "", "header.artifact"),
    (ALICE, "needs-a-session", "header.parent"),
    ("apps/shop", "x", "header.parent"),
])
async def test_bad_ids_are_invalid_argument(client: ContextClient, parent: str, artifact: str, field: str) -> None:
    with pytest.raises(InvalidArgumentError) as bad:
        await client.save_artifact(parent, artifact, "x")
    assert bad.value.reason_name == "INVALID_NAME"
    assert [v.field for v in bad.value.field_violations] == [field]
    with pytest.raises(InvalidArgumentError) as load:
        await client.load_artifact(parent, artifact)
    assert [v.field for v in load.value.field_violations] == [field.removeprefix("header.")]


async def test_a_stream_without_header_or_part_is_invalid(client: ContextClient) -> None:
    stub = client.artifact_stub

    async def data_first():  # type: ignore[no-untyped-def]
        yield apb.SaveArtifactRequest(data=b"x")

    with pytest.raises(grpc.aio.AioRpcError) as no_header:
        await stub.SaveArtifact(data_first())
    assert no_header.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    async def no_part():  # type: ignore[no-untyped-def]
        yield apb.SaveArtifactRequest(header=apb.SaveArtifactHeader(parent=S1, artifact="a"))

    with pytest.raises(grpc.aio.AioRpcError) as partless:
        await stub.SaveArtifact(no_part())
    assert partless.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_the_same_bytes_are_stored_once(client: ContextClient, db_url: str) -> None:
    data = b"dedup me " * 300_000  # 2.7 MB, three chunks
    a = await client.save_artifact(S1, "a.bin", data)
    b = await client.save_artifact(S2, "b.bin", data)
    c = await client.save_artifact(ALICE, "user:c.bin", data)
    assert a.sha256 == b.sha256 == c.sha256
    store = await open_store(db_url)
    try:
        artifacts = SqlArtifactStore(store)
        assert await artifacts.stored_bytes("shop") == (1, len(data))
        await client.delete_artifact(S1, "a.bin")
        await client.delete_artifact(S2, "b.bin")
        assert await artifacts.stored_bytes("shop") == (1, len(data))
        await client.delete_artifact(ALICE, "user:c.bin")
        assert await artifacts.stored_bytes("shop") == (0, 0)
    finally:
        await store.close()


async def test_another_app_cannot_read_or_write(server_factory: ServerFactory, certs_dir: pathlib.Path) -> None:
    server = await server_factory(
        require_client_cert=True, dev_anonymous_apps=[],
        app_grants={SAMPLE_AGENT_ID: ["shop"], CONTEXT_SERVICE_ID: ["other"]},
    )
    other = "apps/other/users/alice/sessions/s1"
    async with client_of(server, certs_dir, "context-client") as owner:
        await owner.save_artifact(other, "secret.txt", "theirs")
    async with client_of(server, certs_dir, "agent-client") as agent:
        calls = [
            agent.save_artifact(other, "secret.txt", "mine"),
            agent.load_artifact(other, "secret.txt"),
            agent.list_artifacts(other),
            agent.list_artifact_versions(other, "secret.txt"),
            agent.delete_artifact(other, "secret.txt"),
        ]
        for call in calls:
            with pytest.raises(PermissionDeniedError) as denied:
                await call
            assert (denied.value.reason_name, denied.value.metadata) == ("APP_NOT_ALLOWED", {"app": "other"})
        await agent.save_artifact(S1, "ok.txt", "own app")
    async with client_of(server, certs_dir, "context-client") as owner:
        assert [v.version for v in await owner.list_artifact_versions(other, "secret.txt")] == [0]


async def test_health_and_reflection_list_the_service(client: ContextClient, certs_dir: pathlib.Path) -> None:
    name = apb.DESCRIPTOR.services_by_name["ArtifactService"].full_name
    health = health_pb2_grpc.HealthStub(client.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(client.channel)
    call = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    services = [s.name async for r in call for s in r.list_services_response.service]
    assert name in services
    assert artifacts_pb2_grpc.ArtifactServiceStub is not None
    del certs_dir


async def test_spans_carry_no_names_or_bytes(client: ContextClient) -> None:
    exporter = span_exporter()
    secret_name, secret_text = "user:diary-of-alice.txt", "the secret plans"
    saved = await client.save_artifact(S1, secret_name, secret_text)
    await client.load_artifact(S1, secret_name)
    await client.list_artifacts(S1)
    spans = [s for s in exporter.get_finished_spans() if "ArtifactService" in s.name]
    assert {s.name.rsplit("/", 1)[-1] for s in spans} >= {"SaveArtifact", "LoadArtifact", "ListArtifactNames"}
    rendered = repr([dict(s.attributes or {}) for s in spans])
    assert "diary" not in rendered and "secret" not in rendered
    save = next(s for s in spans if s.name.endswith("SaveArtifact"))
    assert save.attributes is not None
    assert save.attributes["artifact.size_bytes"] == len(secret_text)
    assert save.attributes["artifact.sha256"] == saved.sha256
