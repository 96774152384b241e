"""A local S3-compatible server for the object-store tests: moto's server
mode (``python -m moto.server``) on 127.0.0.1, started by the tests' own
fixture on a free port, with dummy credentials. Nothing leaves loopback."""

from __future__ import annotations

import contextlib
import pathlib
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3

from tests.support.processes import free_port

ACCESS_KEY = "agentctx-test"
SECRET_KEY = "agentctx-test-secret"
REGION = "us-east-1"
STARTED_WITHIN_S = 120.0


@contextlib.contextmanager
def moto_server(log: pathlib.Path) -> Iterator[str]:
    """A moto server on a free loopback port; yields its endpoint URL."""
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTED_WITHIN_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(f"{endpoint}/", timeout=1):
                    break
            except urllib.error.HTTPError:
                break  # it answers
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def client(endpoint: str) -> Any:
    """A plain (synchronous) S3 client to the server, for checks."""
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


def new_bucket(endpoint: str) -> str:
    name = "agentctx-" + secrets.token_hex(6)
    client(endpoint).create_bucket(Bucket=name)
    return name


def settings_for(endpoint: str, bucket: str, prefix: str = "artifacts") -> dict[str, Any]:
    """ContextSettings fields pointing artifacts at ``bucket`` (smallest parts)."""
    return {
        "artifact_store_url": f"s3://{bucket}/{prefix}",
        "artifact_s3_endpoint_url": endpoint,
        "artifact_s3_region": REGION,
        "artifact_s3_access_key_id": ACCESS_KEY,
        "artifact_s3_secret_access_key": SECRET_KEY,
        "artifact_s3_part_bytes": 5 * 1024 * 1024,
    }


def stored(endpoint: str, bucket: str) -> list[str]:
    """Every object and every unfinished multipart upload in the bucket."""
    s3 = client(endpoint)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return sorted(keys + [f"multipart:{u['Key']}" for u in uploads])
