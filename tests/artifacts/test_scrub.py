"""The artifact scrub (storage.artifact_scrub) on every backend, with the
bytes in the database and in an S3-compatible store (a local moto server):
stored bytes nothing names are deleted once older than the grace period
and kept before it (the database's chunk rows have no age), named bytes
are never deleted (a Hypothesis property over random saves, deletes and
scrubs running beside them, and a save in flight), missing bytes are
counted and logged, blob rows no version references are reported, a dry
run deletes nothing, foreign keys are left alone, a database chunk write
after its upload was collected stores nothing, logs carry counts only; the service's schedule and the
``agentctx artifacts scrub`` command."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import pathlib
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx_cli.main import main
from agentctx_common.errors import Aborted
from context_service.domain.artifacts import CHUNK_BYTES, ArtifactScope, ContentDigest, ScrubReport
from context_service.ports import BlobStore
from context_service.server import start_artifact_scrubber
from context_service.settings import ContextSettings
from context_service.storage.factory import Backend
from context_service.storage.tables import artifact_blobs, artifact_uploads, artifact_versions
from tests.storage.conformance.conftest import open_stores
from tests.storage.conformance.test_artifacts import _chunks, load, save
from tests.support.s3 import client as s3_client
from tests.support.s3 import new_bucket, settings_for

APP = "shop:eu@team+1"
SESSION = ArtifactScope(APP, "alice", "s1")
NOW = dt.timedelta(seconds=-1)  # a grace period every stored thing is past
HOUR = dt.timedelta(hours=1)
# Polling for an upload in flight to reach the store: bounded, not a timed assertion.
STORED_WITHIN_S = 120.0


@pytest.fixture(params=["database", "s3"])
def s3(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Where the bytes live: the database ({}) or a new bucket."""
    if request.param == "database":
        return {}
    endpoint: str = request.getfixturevalue("s3_endpoint")
    return settings_for(endpoint, new_bucket(endpoint))


@pytest.fixture
async def stores(db_url: str, tmp_path: pathlib.Path, s3: dict[str, Any]) -> AsyncIterator[Backend]:
    async with open_stores(db_url, tmp_path, **s3) as opened:
        yield opened


def _blobs(stores: Backend) -> BlobStore:
    return stores.artifacts.blobs  # type: ignore[attr-defined, no-any-return]


def _external(stores: Backend) -> bool:
    return _blobs(stores).kind != "u"


async def _scrub(stores: Backend, grace: dt.timedelta, *, dry_run: bool = False) -> ScrubReport:
    """The report of the store new bytes go to (the database's is checked too)."""
    reports = await stores.artifacts.scrub(grace, dry_run=dry_run)
    assert [r.store for r in reports] == (["database", "s3"] if _external(stores) else ["database"])
    if _external(stores):
        assert reports[0].orphaned == reports[0].missing == 0
    return reports[-1]


async def _orphan(stores: Backend, app: str = APP, data: bytes = b"left behind") -> str:
    """Bytes stored under a fresh key that nothing names (a crash's, a copy's)."""
    blobs = _blobs(stores)
    key = blobs.kind + secrets.token_hex(16)
    writer = blobs.writer(app, key)
    await writer.write(data)
    await writer.finish()
    async with stores.sessions.engine.begin() as conn:  # type: ignore[attr-defined]
        # The database store lists its own uploads: unlist it.
        await conn.execute(sa.delete(artifact_uploads).where(artifact_uploads.c.upload_key == key))
    return key


async def _stored_keys(stores: Backend) -> set[tuple[str, str]]:
    return set(await _blobs(stores).keys())


async def _named_keys(stores: Backend) -> set[tuple[str, str]]:
    """(app, key) of the blobs with bytes stored (an empty one in the database has none)."""
    b = artifact_blobs.c
    async with stores.sessions.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = (await conn.execute(sa.select(b.app, b.chunk_key).where(b.chunk_count > 0))).all()
    return {(row.app, row.chunk_key) for row in rows}


async def test_unnamed_bytes_are_deleted_and_named_ones_kept(stores: Backend) -> None:
    await save(stores.artifacts, SESSION, "a", b"shared")
    await save(stores.artifacts, SESSION, "b", b"shared")  # the same blob
    await save(stores.artifacts, SESSION, "c", b"c" * (2 * CHUNK_BYTES + 3))
    await stores.artifacts.delete(SESSION, "a", None)  # "b" still names the shared bytes
    orphan = await _orphan(stores, data=b"x" * 1000)
    other = await _orphan(stores, app="other-app")
    report = await _scrub(stores, NOW)
    assert (report.orphaned, report.deleted, report.young, report.missing, report.foreign) == (2, 2, 0, 0, 0)
    assert report.orphaned_bytes == report.deleted_bytes == 1000 + len(b"left behind")
    assert report.checked == 4
    assert await _stored_keys(stores) == await _named_keys(stores)
    assert (APP, orphan) not in await _stored_keys(stores) and ("other-app", other) not in await _stored_keys(stores)
    assert await load(stores.artifacts, SESSION, "b") == b"shared"
    assert await load(stores.artifacts, SESSION, "c") == b"c" * (2 * CHUNK_BYTES + 3)
    # Nothing left to do.
    again = await _scrub(stores, NOW)
    assert (again.checked, again.orphaned, again.deleted) == (2, 0, 0)


async def test_the_grace_period_keeps_young_objects(stores: Backend) -> None:
    """Objects and uploads younger than the grace period stay; chunk rows
    have no age (their writes cannot leave them unnamed: see the module)."""
    await _orphan(stores)
    first = await _scrub(stores, HOUR)
    if _external(stores):
        assert (first.young, first.orphaned, first.deleted) == (1, 0, 0)
        assert len(await _stored_keys(stores)) == 1
        later = await _scrub(stores, NOW)
        assert (later.young, later.orphaned, later.deleted) == (0, 1, 1)
    else:
        assert (first.young, first.orphaned, first.deleted) == (0, 1, 1)
    assert await _stored_keys(stores) == set()


async def test_a_dry_run_deletes_nothing(stores: Backend) -> None:
    await save(stores.artifacts, SESSION, "a", b"kept")
    orphan = await _orphan(stores, data=b"12345")
    dry = await _scrub(stores, NOW, dry_run=True)
    assert (dry.orphaned, dry.orphaned_bytes, dry.deleted, dry.deleted_bytes, dry.dry_run) == (1, 5, 0, 0, True)
    assert (APP, orphan) in await _stored_keys(stores)
    real = await _scrub(stores, NOW)
    assert (real.orphaned, real.deleted) == (1, 1)
    assert (APP, orphan) not in await _stored_keys(stores)


async def test_missing_bytes_are_counted_and_logged(stores: Backend, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentctx")
    alone = ArtifactScope("lonely-app", "bob", "s9")
    await save(stores.artifacts, SESSION, "present", b"here")
    await save(stores.artifacts, SESSION, "gone", b"lost bytes")
    await save(stores.artifacts, alone, "gone-too", b"lost as well")  # its app has nothing left in the store
    async with stores.sessions.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = (await conn.execute(sa.select(artifact_blobs.c.app, artifact_blobs.c.chunk_key)
                                   .where(artifact_blobs.c.size_bytes != 4))).all()
    for row in rows:
        await _blobs(stores).delete(row.app, row.chunk_key)
    # Young blobs are not checked (their bytes may be written after the listing began).
    assert (await _scrub(stores, HOUR)).missing == 0
    report = await _scrub(stores, NOW)
    assert (report.missing, report.missing_bytes) == (2, len(b"lost bytes") + len(b"lost as well"))
    assert (report.orphaned, report.deleted) == (0, 0)
    assert await load(stores.artifacts, SESSION, "present") == b"here"
    warned = [r for r in caplog.records if r.name == "agentctx.context.artifacts.scrub" and r.levelno == logging.WARNING]
    assert [getattr(r, "missing", None) for r in warned] == [2]
    rendered = repr([(r.getMessage(), r.__dict__) for r in caplog.records if r.name.startswith("agentctx")])
    for secret in (APP, "lonely-app", "gone", *(row.chunk_key for row in rows), "artifacts/"):
        assert secret not in rendered


async def test_blobs_no_version_references_are_reported_not_deleted(stores: Backend,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentctx")
    await save(stores.artifacts, SESSION, "a", b"kept bytes")
    await save(stores.artifacts, SESSION, "b", b"also kept")
    assert (await stores.artifacts.scrub(NOW))[0].unversioned == 0
    async with stores.sessions.engine.begin() as conn:  # type: ignore[attr-defined]
        # A hand (or a bug) deletes a version without its blob's refcount.
        await conn.execute(sa.delete(artifact_versions).where(artifact_versions.c.artifact == "a"))
    reports = await stores.artifacts.scrub(NOW)
    assert (reports[0].unversioned, reports[0].unversioned_bytes) == (1, len(b"kept bytes"))
    assert all((r.orphaned, r.deleted, r.missing) == (0, 0, 0) for r in reports)
    assert await _stored_keys(stores) == await _named_keys(stores) and len(await _named_keys(stores)) == 2
    warned = [r for r in caplog.records if r.getMessage() == "artifact scrub: blobs no version references"]
    assert [getattr(r, "unversioned", None) for r in warned] == [1]


async def test_a_save_in_flight_is_never_scrubbed(stores: Backend) -> None:
    hold = asyncio.Event()
    data = [bytes([i]) * CHUNK_BYTES for i in range(7)]
    digest = ContentDigest(1 << 30, text=False)

    async def stalls() -> AsyncIterator[bytes]:
        async for chunk in _chunks(b"".join(data[:6]), digest, piece=CHUNK_BYTES):
            yield chunk
        await hold.wait()  # past the database's first write and an S3 part
        async for chunk in _chunks(data[6], digest, piece=CHUNK_BYTES):
            yield chunk

    saving = asyncio.ensure_future(stores.artifacts.save(
        SESSION, "slow", mime_type="a/b", text=False, custom_metadata={}, chunks=stalls(), digest=digest,
        quota_bytes=0,
    ))
    deadline = time.monotonic() + STORED_WITHIN_S
    while not await _stored_keys(stores):
        assert time.monotonic() < deadline, "the save stored nothing"
        await asyncio.sleep(0.05)
    report = await _scrub(stores, NOW)
    assert (report.checked, report.orphaned, report.deleted, report.young) == (1, 0, 0, 0)
    hold.set()
    await saving
    assert await load(stores.artifacts, SESSION, "slow") == b"".join(data)
    assert (await _scrub(stores, NOW)).orphaned == 0


@pytest.mark.parametrize("s3", ["s3"], indirect=True)  # object stores only
async def test_unnamed_multipart_uploads_are_aborted_and_foreign_keys_left(stores: Backend,
                                                                           s3: dict[str, Any]) -> None:
    bucket = s3["artifact_store_url"].removeprefix("s3://").split("/")[0]
    client = s3_client(s3["artifact_s3_endpoint_url"])
    key = "artifacts/shop/s" + secrets.token_hex(16)
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"p" * 100)
    foreign = ["artifacts/README", "artifacts/shop/notes.txt", "artifacts/shop:eu/s" + secrets.token_hex(16),
               "elsewhere/shop/s" + secrets.token_hex(16)]
    for name in foreign:
        client.put_object(Bucket=bucket, Key=name, Body=b"theirs")
    report = await _scrub(stores, NOW)
    # Unquoted ":" is not how this service names the app: foreign too.
    assert (report.orphaned, report.deleted, report.foreign) == (1, 1, 3)
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    listed = {o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert listed == set(foreign)


@pytest.mark.parametrize("s3", ["database"], indirect=True)  # the database's chunk rows only
async def test_a_chunk_write_after_collection_stores_nothing(stores: Backend) -> None:
    """The database store's writes hold their listing: once the collector
    took an upload, a late write is ABORTED and, even if the process then
    dies before its abort, leaves no chunk row nobody names."""
    blobs = _blobs(stores)
    assert not _external(stores)
    writer = blobs.writer(APP, blobs.kind + secrets.token_hex(16))
    for i in range(4):  # one write transaction, listing the upload
        await writer.write(bytes([i]) * CHUNK_BYTES)
    assert len(await _stored_keys(stores)) == 1
    assert await stores.artifacts.collect_uploads(NOW) == 1
    for _ in range(3):
        await writer.write(b"late")
    with pytest.raises(Aborted):
        await writer.write(b"late")  # its write transaction
    assert await _stored_keys(stores) == set()  # no abort() ran: nothing to collect, nothing to scrub


# --- named bytes are never deleted: a property ----------------------------------

_names = st.sampled_from(["a", "b", "user:c"])
_CONTENTS = [b"", b"one", b"two", b"x" * (CHUNK_BYTES + 1)]
_contents = st.sampled_from(range(len(_CONTENTS)))
_operations = st.lists(st.one_of(
    st.tuples(st.just("save"), _names, _contents),
    st.tuples(st.just("delete"), _names, st.one_of(st.none(), st.integers(0, 3))),
    st.tuples(st.just("scrub"), st.booleans(), st.none()),
), min_size=1, max_size=12)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=_operations)
async def test_named_bytes_are_never_deleted(stores: Backend, ops: list[tuple[str, Any, Any]]) -> None:
    """Random saves and deletes (contents shared between names and
    versions), scrubs with no grace period running beside the next
    operation: every version left loads its bytes, and the scrub deletes
    exactly the bytes nothing names."""
    session = uuid.uuid4().hex
    model: dict[tuple[str, int], bytes] = {}
    scrubs: list[asyncio.Task[list[ScrubReport]]] = []

    def scope(name: str) -> ArtifactScope:
        return ArtifactScope(APP, session, None if name.startswith("user:") else session)  # a user per example

    for op, name, arg in ops:
        if op == "scrub":
            scrubs.append(asyncio.ensure_future(stores.artifacts.scrub(NOW, dry_run=name)))
            await asyncio.sleep(0)  # under way before the next operation
        elif op == "save":
            version = await save(stores.artifacts, scope(name), name, _CONTENTS[arg])
            model[(name, version)] = _CONTENTS[arg]
        else:
            deleted = await stores.artifacts.delete(scope(name), name, arg)
            gone = [k for k in model if k[0] == name and arg in (None, k[1])]
            assert deleted == len(gone)
            for k in gone:
                del model[k]
    for report in [r for reports in await asyncio.gather(*scrubs) for r in reports]:
        assert (report.orphaned, report.deleted, report.missing) == (0, 0, 0)
    for (name, version), data in model.items():
        assert await load(stores.artifacts, scope(name), name, version) == data
    final = await stores.artifacts.scrub(NOW)
    assert all((r.orphaned, r.missing, r.unversioned) == (0, 0, 0) for r in final)
    assert await _stored_keys(stores) == await _named_keys(stores)


# --- the service's schedule and the command --------------------------------------


class _Artifacts:
    def __init__(self) -> None:
        self.calls: list[dt.timedelta] = []
        self.second = asyncio.Event()

    async def scrub(self, grace: dt.timedelta, *, dry_run: bool = False) -> list[ScrubReport]:
        self.calls.append(grace)
        if len(self.calls) == 1:
            raise RuntimeError("secret-key-in-the-text")
        self.second.set()
        return []


class _Backend:
    def __init__(self) -> None:
        self.artifacts = _Artifacts()


async def test_the_service_scrubs_on_its_schedule_past_failures(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentctx")
    backend = _Backend()
    task = start_artifact_scrubber(backend, dt.timedelta(milliseconds=1), HOUR)  # type: ignore[arg-type]
    try:
        await backend.artifacts.second.wait()
    finally:
        task.cancel()
    assert backend.artifacts.calls[:2] == [HOUR, HOUR]
    failed = [r for r in caplog.records if r.getMessage() == "artifact scrub failed"]
    assert [getattr(r, "error_type", None) for r in failed] == ["RuntimeError"]
    assert "secret-key" not in repr([(r.getMessage(), r.__dict__) for r in caplog.records])


def test_the_schedule_is_daily_by_default() -> None:
    defaults = ContextSettings(dev_plaintext=True, host="127.0.0.1")
    assert (defaults.artifact_scrub_interval_s, defaults.artifact_scrub_grace_s) == (86400.0, 86400.0)


def _config(path: pathlib.Path, tmp_path: pathlib.Path, s3: dict[str, Any]) -> pathlib.Path:
    lines = ["[context]", f"data_dir = {str(tmp_path / 'data')!r}"]
    lines += [f"{k} = {v!r}" for k, v in s3.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_the_command_prints_counts_only(stores: Backend, db_url: str, tmp_path: pathlib.Path,
                                              s3: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path / "agentctx.toml", tmp_path, s3)
    await save(stores.artifacts, SESSION, "a", b"kept")
    orphan = await _orphan(stores, data=b"12345")
    run = ["artifacts", "scrub", "--config", str(config), "--database-url", db_url, "--grace-s", "0"]
    capsys.readouterr()

    assert await asyncio.to_thread(main, [*run, "--dry-run"]) == 0
    out = capsys.readouterr().out
    store = "s3" if s3 else "database"
    assert f"{store}: 2 checked" in out and "1 orphaned (5 B), dry run, none deleted" in out
    assert (APP, orphan) in await _stored_keys(stores)

    assert await asyncio.to_thread(main, run) == 0
    out = capsys.readouterr().out
    assert "1 orphaned (5 B), 1 deleted (5 B)" in out and "0 missing (0 B)" in out
    assert len(out.splitlines()) == (2 if s3 else 1)
    for secret in (APP, orphan, "artifacts/", *(s3.values() if s3 else [])):
        assert str(secret) not in out
    assert await _stored_keys(stores) == await _named_keys(stores)

    ((app, key),) = await _named_keys(stores)
    await _blobs(stores).delete(app, key)
    assert await asyncio.to_thread(main, run) == 1
    assert "1 missing (4 B)" in capsys.readouterr().out
