"""The store contract, artifacts (ports.ArtifactStore), on every backend,
with the bytes in the database and in an S3-compatible object store:
versions, latest, scopes, chunked round trips, content addressing (the same
bytes stored once, collected with the last version naming them), quota,
failed, crashed and abandoned uploads (nothing stored that the database
does not name, after collection), and session deletion."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from agentctx_common.errors import Aborted, InvalidArgument, NotFound, ResourceExhausted, Unavailable
from context_service.domain.artifacts import CHUNK_BYTES, ArtifactScope, Chunker, ContentDigest
from context_service.ports import ArtifactStore
from context_service.storage.artifacts import SqlArtifactStore
from context_service.storage.factory import Backend
from context_service.storage.tables import artifact_blobs, artifact_uploads
from tests.storage.conformance.conftest import open_stores
from tests.storage.conformance.support import KEY, new_session
from tests.support.s3 import new_bucket, settings_for

SESSION = ArtifactScope(KEY.app, KEY.user, KEY.session)
USER = ArtifactScope(KEY.app, KEY.user, None)


async def _chunks(data: bytes, digest: ContentDigest, piece: int = 300_000) -> AsyncIterator[bytes]:
    chunker = Chunker()
    for i in range(0, len(data), piece):
        part = data[i:i + piece]
        digest.update(part)
        for chunk in chunker.feed(part):
            yield chunk
    for chunk in chunker.flush():
        yield chunk


async def save(store: ArtifactStore, scope: ArtifactScope, name: str, data: bytes, *, quota: int = 0,
               text: bool = False, max_bytes: int = 1 << 30, metadata: dict[str, object] | None = None,
               staged_call: str | None = None) -> int:
    digest = ContentDigest(max_bytes, text=text)
    record = await store.save(scope, name, mime_type="text/plain" if text else "application/octet-stream",
                              text=text, custom_metadata=metadata or {}, chunks=_chunks(data, digest),
                              digest=digest, quota_bytes=quota, staged_call=staged_call)
    return record.version


async def load(store: ArtifactStore, scope: ArtifactScope, name: str, version: int | None = None) -> bytes:
    record = await store.get_version(scope, name, version)
    return b"".join([chunk async for chunk in store.read_chunks(record)])


@pytest.fixture(params=["database", "s3"])
async def stores(request: pytest.FixtureRequest, db_url: str, tmp_path: pathlib.Path) -> AsyncIterator[Backend]:
    """Every port of one backend, its artifact bytes in the database or in a
    new bucket of the local S3-compatible server."""
    overrides: dict[str, Any] = {}
    if request.param == "s3":
        endpoint: str = request.getfixturevalue("s3_endpoint")
        overrides = settings_for(endpoint, new_bucket(endpoint))
    async with open_stores(db_url, tmp_path, **overrides) as opened:
        yield opened


@pytest.fixture
def artifacts(stores: Backend) -> ArtifactStore:
    return stores.artifacts


async def _named_keys(stores: Backend) -> set[tuple[str, str]]:
    engine = stores.sessions.engine  # type: ignore[attr-defined]
    async with engine.connect() as conn:
        rows = (await conn.execute(sa.select(artifact_blobs.c.app, artifact_blobs.c.chunk_key))).all()
    return {(row.app, row.chunk_key) for row in rows}


async def _unreferenced(stores: Backend) -> int:
    """Stored bytes (chunk rows, objects, multipart uploads) no blob names."""
    blobs = stores.artifacts.blobs  # type: ignore[attr-defined]
    return len(set(await blobs.keys()) - await _named_keys(stores))


async def _listed_uploads(stores: Backend) -> int:
    engine = stores.sessions.engine  # type: ignore[attr-defined]
    async with engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(artifact_uploads))).scalar_one())


async def test_versions_latest_and_metadata(artifacts: ArtifactStore) -> None:
    assert await save(artifacts, SESSION, "a.txt", b"one", metadata={"k": [1]}) == 0
    assert await save(artifacts, SESSION, "a.txt", b"two!") == 1
    assert await load(artifacts, SESSION, "a.txt") == b"two!"
    assert await load(artifacts, SESSION, "a.txt", 0) == b"one"
    versions = await artifacts.list_versions(SESSION, "a.txt")
    assert [(v.version, v.size_bytes, v.sha256) for v in versions] == [
        (0, 3, hashlib.sha256(b"one").hexdigest()), (1, 4, hashlib.sha256(b"two!").hexdigest()),
    ]
    assert versions[0].custom_metadata == {"k": [1]}
    assert versions[0].create_time.tzinfo is not None
    with pytest.raises(NotFound) as missing:
        await artifacts.get_version(SESSION, "a.txt", 7)
    assert missing.value.reason == "ARTIFACT_NOT_FOUND"
    with pytest.raises(NotFound):
        await artifacts.get_version(SESSION, "nope", None)


async def test_multi_chunk_round_trip_and_empty(artifacts: ArtifactStore) -> None:
    data = bytes(range(256)) * (5 * CHUNK_BYTES // 256) + b"tail"
    await save(artifacts, SESSION, "big.bin", data)
    record = await artifacts.get_version(SESSION, "big.bin", None)
    chunks = [chunk async for chunk in artifacts.read_chunks(record)]
    assert len(chunks) == 6 and all(len(c) <= CHUNK_BYTES for c in chunks)
    assert b"".join(chunks) == data
    await save(artifacts, SESSION, "empty", b"")
    assert await load(artifacts, SESSION, "empty") == b""


async def test_scopes_and_names(artifacts: ArtifactStore) -> None:
    other = ArtifactScope(KEY.app, KEY.user, "s2")
    await save(artifacts, SESSION, "mine", b"1")
    await save(artifacts, other, "theirs", b"2")
    await save(artifacts, USER, "user:shared", b"3")
    assert await artifacts.list_names(KEY.app, KEY.user, KEY.session) == ["mine", "user:shared"]
    assert await artifacts.list_names(KEY.app, KEY.user, "s2") == ["theirs", "user:shared"]
    assert await artifacts.list_names(KEY.app, KEY.user, None) == ["user:shared"]
    assert await artifacts.list_names(KEY.app, "bob", KEY.session) == []
    with pytest.raises(NotFound):
        await artifacts.get_version(other, "mine", None)


async def test_same_bytes_stored_once_and_collected(artifacts: ArtifactStore, stores: Backend) -> None:
    data = b"x" * (CHUNK_BYTES + 10)
    await save(artifacts, SESSION, "a", data)
    await save(artifacts, SESSION, "b", data)
    await save(artifacts, USER, "user:c", data)
    assert await artifacts.stored_bytes(KEY.app) == (1, len(data))
    assert await artifacts.delete(SESSION, "a", None) == 1
    assert await artifacts.delete(SESSION, "b", 0) == 1
    assert await artifacts.stored_bytes(KEY.app) == (1, len(data))
    assert await load(artifacts, USER, "user:c") == data
    assert await artifacts.delete(USER, "user:c", None) == 1
    assert await artifacts.stored_bytes(KEY.app) == (0, 0)
    assert await _unreferenced(stores) == 0 and await artifacts.blobs.keys() == []  # type: ignore[attr-defined]
    assert await artifacts.delete(USER, "user:c", None) == 0
    # Stored again after collection: a fresh blob, readable.
    await save(artifacts, SESSION, "a", data)
    assert await load(artifacts, SESSION, "a") == data


async def test_delete_one_version_keeps_the_others(artifacts: ArtifactStore) -> None:
    for body in (b"0", b"1", b"2"):
        await save(artifacts, SESSION, "v", body)
    assert await artifacts.delete(SESSION, "v", 1) == 1
    assert [v.version for v in await artifacts.list_versions(SESSION, "v")] == [0, 2]
    assert await load(artifacts, SESSION, "v") == b"2"
    assert await save(artifacts, SESSION, "v", b"3") == 3


async def test_quota_counts_distinct_bytes(artifacts: ArtifactStore) -> None:
    await save(artifacts, SESSION, "a", b"x" * 60, quota=100)
    await save(artifacts, SESSION, "a", b"x" * 60, quota=100)  # stored already: free
    with pytest.raises(ResourceExhausted) as over:
        await save(artifacts, SESSION, "b", b"y" * 41, quota=100)
    assert over.value.reason == "ARTIFACT_QUOTA_EXCEEDED"
    assert over.value.metadata == {"quota_bytes": "100", "used_bytes": "60", "requested_bytes": "41"}
    assert await artifacts.list_names(KEY.app, KEY.user, KEY.session) == ["a"]
    assert await artifacts.stored_bytes(KEY.app) == (1, 60)
    # Another app has a quota of its own.
    await save(artifacts, ArtifactScope("other", "u", "s"), "b", b"y" * 41, quota=100)


async def test_a_failed_save_leaves_nothing(artifacts: ArtifactStore, stores: Backend) -> None:
    with pytest.raises(ResourceExhausted) as large:
        await save(artifacts, SESSION, "big", b"z" * (7 * CHUNK_BYTES), max_bytes=6 * CHUNK_BYTES)
    assert large.value.reason == "ARTIFACT_TOO_LARGE"
    with pytest.raises(InvalidArgument):
        await save(artifacts, SESSION, "t", "é".encode()[:1], text=True)
    await save(artifacts, SESSION, "kept", b"k" * 100)
    with pytest.raises(ResourceExhausted):
        await save(artifacts, SESSION, "over", b"q" * (6 * CHUNK_BYTES), quota=CHUNK_BYTES)
    assert await artifacts.list_names(KEY.app, KEY.user, KEY.session) == ["kept"]
    assert await artifacts.stored_bytes(KEY.app) == (1, 100)
    assert (await _unreferenced(stores), await _listed_uploads(stores)) == (0, 0)


async def _counted(chunks: AsyncIterator[bytes], digest: ContentDigest) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        digest.update(chunk)
        yield chunk


async def _crash_in(monkeypatch: pytest.MonkeyPatch, artifacts: ArtifactStore, method: str | None,
                    chunks: int) -> None:
    """A save that dies as a killed process does: KeyboardInterrupt after
    ``chunks`` chunks (or in ``method``), and no cleanup runs."""
    async def stalls() -> AsyncIterator[bytes]:
        for _ in range(chunks):
            yield b"a" * CHUNK_BYTES
        if method is None:
            raise KeyboardInterrupt

    async def dies(*args: object, **kwargs: object) -> Any:
        raise KeyboardInterrupt

    async def no_cleanup(*args: object) -> None:
        return None

    monkeypatch.setattr(SqlArtifactStore, "_abandon", no_cleanup)
    if method is not None:
        monkeypatch.setattr(SqlArtifactStore, method, dies)
    digest = ContentDigest(1 << 30, text=False)
    with pytest.raises(KeyboardInterrupt):
        await artifacts.save(SESSION, "x", mime_type="a/b", text=False, custom_metadata={},
                             chunks=_counted(stalls(), digest), digest=digest, quota_bytes=0)
    monkeypatch.undo()


@pytest.mark.parametrize(("method", "chunks"), [
    (None, 6),  # mid-stream: staged rows, or a multipart upload with a part
    ("_commit", 6),  # the bytes all stored (an object complete), the commit never ran
    ("_commit", 1),  # a small object (one PutObject), never committed
])
async def test_crashed_uploads_are_invisible_and_collected(
    artifacts: ArtifactStore, stores: Backend, monkeypatch: pytest.MonkeyPatch, method: str | None, chunks: int,
) -> None:
    await save(artifacts, SESSION, "kept", b"k" * 100)
    await _crash_in(monkeypatch, artifacts, method, chunks)
    assert await artifacts.list_names(KEY.app, KEY.user, KEY.session) == ["kept"]
    assert await _unreferenced(stores) == 1
    assert await artifacts.collect_uploads(dt.timedelta(hours=1)) == 0  # within the grace period
    assert await _unreferenced(stores) == 1
    assert await artifacts.collect_uploads(dt.timedelta(seconds=-1)) == 1
    assert (await _unreferenced(stores), await _listed_uploads(stores)) == (0, 0)
    assert await load(artifacts, SESSION, "kept") == b"k" * 100


async def test_a_collected_upload_cannot_commit(artifacts: ArtifactStore, stores: Backend) -> None:
    """A save still streaming when the collector takes it (after the grace
    period) fails ABORTED and leaves nothing."""
    digest = ContentDigest(1 << 30, text=False)

    async def slow() -> AsyncIterator[bytes]:
        for i in range(5):  # past the database's first write, and an S3 part
            yield bytes([i]) * CHUNK_BYTES
        assert await artifacts.collect_uploads(dt.timedelta(seconds=-1)) == 1
        yield b"c"

    # ABORTED; or, when an S3 part was in flight, whatever the store answers
    # that part (moto: 500, UNAVAILABLE).
    with pytest.raises((Aborted, Unavailable)):
        await artifacts.save(SESSION, "late", mime_type="a/b", text=False, custom_metadata={},
                             chunks=_counted(slow(), digest), digest=digest, quota_bytes=0)
    assert await artifacts.list_names(KEY.app, KEY.user, KEY.session) == []
    assert (await _unreferenced(stores), await _listed_uploads(stores)) == (0, 0)


async def test_released_bytes_wait_for_the_collector_when_deletion_fails(
    artifacts: ArtifactStore, stores: Backend, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deleting versions commits in the database whatever the blob store
    says; bytes it could not delete then stay listed and are collected."""
    data = b"d" * (2 * CHUNK_BYTES)
    blobs = stores.artifacts.blobs  # type: ignore[attr-defined]
    external = blobs.kind != "u"

    async def down(*args: object) -> None:
        raise Unavailable("down", retry_after=1.0)

    await save(artifacts, SESSION, "a", data)
    monkeypatch.setattr(type(blobs), "delete", down)
    await save(artifacts, SESSION, "dup", data)  # the same bytes: its upload's are released
    assert await artifacts.delete(SESSION, "a", None) == 1
    assert await artifacts.delete(SESSION, "dup", None) == 1
    assert await artifacts.stored_bytes(KEY.app) == (0, 0)
    assert await _unreferenced(stores) == (2 if external else 0)
    assert await artifacts.collect_uploads(dt.timedelta(hours=1)) == 0
    monkeypatch.undo()
    assert await artifacts.collect_uploads(dt.timedelta(hours=1)) == (2 if external else 0)
    assert (await _unreferenced(stores), await _listed_uploads(stores)) == (0, 0)
    assert await blobs.keys() == []


async def test_deleting_a_session_deletes_its_artifacts_not_the_users(stores: Backend) -> None:
    artifacts = stores.artifacts
    await new_session(stores.sessions)
    await save(artifacts, SESSION, "mine", b"session bytes")
    await save(artifacts, SESSION, "dup", b"shared bytes")
    await save(artifacts, USER, "user:keep", b"shared bytes")
    await stores.sessions.delete_session(KEY)
    assert await artifacts.list_names(KEY.app, KEY.user, KEY.session) == ["user:keep"]
    assert await load(artifacts, USER, "user:keep") == b"shared bytes"
    assert await artifacts.stored_bytes(KEY.app) == (1, len(b"shared bytes"))
    # Bytes outside the database go with the next collection (released: no grace period).
    await artifacts.collect_uploads(dt.timedelta(hours=1))
    blobs = artifacts.blobs  # type: ignore[attr-defined]
    assert await blobs.keys() == sorted(await _named_keys(stores))
    assert (await _unreferenced(stores), await _listed_uploads(stores)) == (0, 0)


async def test_concurrent_saves_get_distinct_versions_and_share_one_blob(artifacts: ArtifactStore) -> None:
    data = b"same bytes" * 1000
    versions = await asyncio.gather(*(save(artifacts, SESSION, "race", data, quota=1 << 30) for _ in range(12)))
    assert sorted(versions) == list(range(12))
    assert await artifacts.stored_bytes(KEY.app) == (1, len(data))
    distinct = await asyncio.gather(*(save(artifacts, SESSION, f"n{i}", bytes([i]) * 10) for i in range(4)))
    assert distinct == [0, 0, 0, 0]
    assert await artifacts.stored_bytes(KEY.app) == (5, len(data) + 40)
