"""The blob port's contract (ports.BlobStore), on the database's chunk rows
and on an S3-compatible object store (a local moto server): round trips in
exact CHUNK_BYTES chunks whatever the writes' sizes (single and multipart
uploads on S3), the empty blob, keys per app (app ids with every allowed
character), abort before and after finish, idempotent delete, and a
missing key."""

from __future__ import annotations

import hashlib
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentctx_common.errors import ConfigError
from context_service.domain.artifacts import CHUNK_BYTES
from context_service.ports import BlobNotFound, BlobStore
from tests.storage.conformance.conftest import open_stores
from tests.support.s3 import new_bucket, settings_for

APP = "shop:eu@team+1.x_y-z"


@pytest.fixture(params=["database", "s3"])
async def blobs(request: pytest.FixtureRequest, db_url: str, tmp_path: pathlib.Path) -> AsyncIterator[BlobStore]:
    overrides: dict[str, Any] = {}
    if request.param == "s3":
        endpoint: str = request.getfixturevalue("s3_endpoint")
        overrides = settings_for(endpoint, new_bucket(endpoint))
    async with open_stores(db_url, tmp_path, **overrides) as opened:
        yield opened.artifacts.blobs  # type: ignore[attr-defined]


def _key(blobs: BlobStore, n: int) -> str:
    return blobs.kind + hashlib.sha256(bytes([n])).hexdigest()[:32]


async def _write(blobs: BlobStore, app: str, key: str, data: bytes, piece: int = CHUNK_BYTES) -> int:
    writer = blobs.writer(app, key)
    for i in range(0, len(data), piece):
        await writer.write(data[i:i + piece])
    return await writer.finish()


async def _read(blobs: BlobStore, app: str, key: str, size: int, parts: int) -> list[bytes]:
    return [chunk async for chunk in blobs.read(app, key, size, parts)]


@pytest.mark.parametrize("size", [1, CHUNK_BYTES, 3 * CHUNK_BYTES + 5, 11 * CHUNK_BYTES + 7])
async def test_round_trip_in_exact_chunks(blobs: BlobStore, size: int) -> None:
    data = hashlib.sha256(str(size).encode()).digest() * (size // 32 + 1)
    data = data[:size]
    key = _key(blobs, 1)
    parts = await _write(blobs, APP, key, data)
    chunks = await _read(blobs, APP, key, size, parts)
    assert b"".join(chunks) == data
    assert all(len(c) == CHUNK_BYTES for c in chunks[:-1]) and 0 < len(chunks[-1]) <= CHUNK_BYTES
    assert await blobs.keys() == [(APP, key)]


async def test_the_empty_blob(blobs: BlobStore) -> None:
    key = _key(blobs, 2)
    parts = await _write(blobs, APP, key, b"")
    assert await _read(blobs, APP, key, 0, parts) == []


async def test_keys_per_app_and_delete(blobs: BlobStore) -> None:
    a, b = _key(blobs, 3), _key(blobs, 4)
    parts_a = await _write(blobs, APP, a, b"a" * 10)
    await _write(blobs, "other", b, b"b" * 10)
    assert sorted(await blobs.keys()) == sorted([(APP, a), ("other", b)])
    await blobs.delete(APP, a)
    await blobs.delete(APP, a)  # idempotent
    await blobs.delete(APP, b)  # another app's key: not this one's
    assert await blobs.keys() == [("other", b)]
    with pytest.raises(BlobNotFound):
        await _read(blobs, APP, a, 10, parts_a)


async def test_abort_before_and_after_finish_leaves_nothing(blobs: BlobStore) -> None:
    unfinished = blobs.writer(APP, _key(blobs, 5))
    for _ in range(7):  # past one multipart part on S3
        await unfinished.write(b"u" * CHUNK_BYTES)
    assert len(await blobs.keys()) == 1  # staged rows, or a multipart upload with a part
    await unfinished.abort()
    finished = blobs.writer(APP, _key(blobs, 6))
    await finished.write(b"f" * 100)
    await finished.finish()
    await finished.abort()
    assert await blobs.keys() == []


async def test_delete_takes_an_unfinished_upload(blobs: BlobStore) -> None:
    """What the collector does with a crashed upload's key."""
    key = _key(blobs, 7)
    unfinished = blobs.writer(APP, key)
    for _ in range(6):
        await unfinished.write(b"p" * CHUNK_BYTES)
    assert await blobs.keys() == [(APP, key)]
    await blobs.delete(APP, key)
    assert await blobs.keys() == []


async def test_a_missing_bucket_is_a_config_error(db_url: str, tmp_path: pathlib.Path, s3_endpoint: str) -> None:
    overrides = settings_for(s3_endpoint, "agentctx-no-such-bucket")
    with pytest.raises(ConfigError) as refused:
        async with open_stores(db_url, tmp_path, **overrides):
            pass
    assert "artifact_store_url" in str(refused.value) and "no-such-bucket" not in str(refused.value)
