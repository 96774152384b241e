"""Artifact bytes in an S3-compatible store (a local moto server) across a
real crash: a context server (a subprocess) is SIGKILLed in the middle of
a save, after a multipart part has reached the bucket. No half-artifact is
visible afterwards, the collection deletes the orphaned upload and keeps
the objects versions name, and the bucket holds nothing else. And with
the store unreachable, the RPCs answer UNAVAILABLE with a retry delay,
never INTERNAL, while metadata stays readable."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import pathlib
import signal
import time
from typing import Any

import grpc
import pytest

from agentctx_client import ContextClient, UnavailableError
from context_service.domain.artifacts import ArtifactScope
from context_service.settings import ContextSettings
from context_service.storage.factory import open_backend
from tests.artifacts.conftest import ServerFactory, client_of
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.s3 import client as s3_client
from tests.support.s3 import moto_server, new_bucket, settings_for, stored
from tests.support.servers import secure_channel

S1 = "apps/shop/users/alice/sessions/s1"
MIB = 1024 * 1024
# Polling for the part to land: bounded, not a timed assertion.
PART_WITHIN_S = 120.0


def _wait_for_a_part(endpoint: str, bucket: str) -> None:
    s3 = s3_client(endpoint)
    deadline = time.monotonic() + PART_WITHIN_S
    while time.monotonic() < deadline:
        for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            parts = s3.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            if parts.get("Parts"):
                return
        time.sleep(0.05)
    raise RuntimeError("no multipart part reached the bucket")


@pytest.mark.slow
async def test_a_save_killed_midway_leaves_no_artifact_and_no_orphan(
    certs_dir: pathlib.Path, tmp_path: pathlib.Path, s3_endpoint: str, s3_bucket: str,
) -> None:
    s3 = settings_for(s3_endpoint, s3_bucket)
    port = free_port()
    data_dir = tmp_path / "data"
    config = write_config(tmp_path / "agentctx.toml", certs_dir, context_port=port, cache_port=free_port(),
                          data_dir=data_dir, context={**s3, "max_message_bytes": 4 * MIB})
    proc = spawn("context", config, tmp_path / "context.log")
    try:
        await asyncio.to_thread(wait_healthy, port, certs_dir, "agent-client", proc)
        hold = asyncio.Event()

        async def stalls():  # type: ignore[no-untyped-def]
            for i in range(7):  # past one 5 MiB part
                yield bytes([i]) * MIB
            await hold.wait()
            yield b"never"

        async with ContextClient(secure_channel(port, certs_dir), timeout=300) as client:
            kept = await client.save_artifact(S1, "kept.bin", b"k" * (6 * MIB))
            saving = asyncio.ensure_future(client.save_artifact(S1, "half.bin", stalls()))
            await asyncio.to_thread(_wait_for_a_part, s3_endpoint, s3_bucket)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            hold.set()
            with pytest.raises(UnavailableError):
                await saving
    finally:
        await asyncio.to_thread(stop, proc)

    before = stored(s3_endpoint, s3_bucket)
    assert len(before) == 2 and sum(k.startswith("multipart:") for k in before) == 1
    settings = ContextSettings(data_dir=data_dir, dev_plaintext=True, host="127.0.0.1", **s3)
    backend = await open_backend(settings)
    try:
        assert await backend.artifacts.list_names("shop", "alice", "s1") == ["kept.bin"]
        # The cleanup a restarted service runs (here without the grace period).
        assert await backend.artifacts.collect_uploads(dt.timedelta(0)) == 1
        record = await backend.artifacts.get_version(ArtifactScope("shop", "alice", "s1"), "kept.bin", None)
        loaded = b"".join([chunk async for chunk in backend.artifacts.read_chunks(record)])
        assert loaded == b"k" * (6 * MIB) and record.sha256 == kept.sha256
    finally:
        await backend.close()
    after = stored(s3_endpoint, s3_bucket)
    assert after == [k for k in before if not k.startswith("multipart:")]


@pytest.fixture
def artifact_bytes() -> dict[str, Any]:
    """This module's servers name their own object store."""
    return {}


async def test_an_unreachable_store_is_unavailable_with_a_retry_delay(
    server_factory: ServerFactory, certs_dir: pathlib.Path, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentctx")
    with moto_server(tmp_path / "moto.log") as endpoint:
        bucket = new_bucket(endpoint)
        s3 = settings_for(endpoint, bucket)
        server = await server_factory(**s3)
        async with client_of(server, certs_dir) as client:
            await client.save_artifact(S1, "saved.txt", "while it was up")
    # The store is gone (its port closed); the database is not.
    async with client_of(server, certs_dir) as client:
        with pytest.raises(UnavailableError) as saving:
            await client.save_artifact(S1, "new.bin", b"x" * (7 * MIB))
        with pytest.raises(UnavailableError) as loading:
            await client.load_artifact(S1, "saved.txt")
        for failed in (saving.value, loading.value):
            assert failed.code == grpc.StatusCode.UNAVAILABLE
            assert failed.reason_name == "ARTIFACT_STORE_UNAVAILABLE"
            assert failed.retry_delay is not None and failed.retry_delay > 0
            assert set(failed.metadata) == {"error_type"}
            assert endpoint.rsplit(":", 1)[-1] not in str(failed) and "saved.txt" not in str(failed)
        assert await client.list_artifacts(S1) == ["saved.txt"]
        assert [v.version for v in await client.list_artifact_versions(S1, "saved.txt")] == [0]
    # Telemetry is content-free: no bucket, key, endpoint or name in any record.
    records = [r for r in caplog.records if r.name.startswith("agentctx")]
    assert any(getattr(r, "error_type", None) for r in records)
    rendered = repr([(r.getMessage(), r.__dict__, r.exc_text) for r in records])
    for secret in (bucket, "saved.txt", "new.bin", endpoint, "artifacts/"):
        assert secret not in rendered
