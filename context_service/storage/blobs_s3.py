"""ports.BlobStore on an S3-compatible object store (``artifact_store_url
= "s3://bucket/prefix"``), through aiobotocore, the AWS SDK's async
client. The database keeps everything else: versions, which blob (app,
sha256) names which object, uploads in progress.

Objects are ``{prefix}{app}/{key}``, the key the upload made ("s" + 32
hex). Each is written once and never overwritten: the database maps the
content address (app, sha256) to it, so the same bytes are stored once and
a deletion can never hit a newer write of the same content. Saves stream:
under one part of ``artifact_s3_part_bytes`` a single PutObject, beyond it
a multipart upload of such parts (one sent while the next gathers); loads
read one GET's body as the client takes CHUNK_BYTES chunks. At most about
two parts of a save and a chunk or two of a load are held here.

Every failure is classified once, here: a missing object (NoSuchKey) is
BlobNotFound, anything else (unreachable, timeouts, 5xx, throttling, a
missing bucket or denied credentials) is UNAVAILABLE
ARTIFACT_STORE_UNAVAILABLE with a retry delay and the error's type or S3
code, never a key, a bucket or bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import urllib.parse
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NoReturn

import aiohttp
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from agentctx_common.errors import Aborted, ConfigError, Unavailable
from agentctx_common.reasons import Reason
from context_service.domain.artifacts import CHUNK_BYTES
from context_service.ports import BlobNotFound, StoredBytes

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

    from context_service.settings import ContextSettings

S3_KIND = "s"
_MISSING = {"NoSuchKey", "NoSuchUpload", "404", "NotFound"}
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}
_REFUSED = {"404", "NoSuchBucket", "403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}
_SAFE_TYPE = re.compile(r"[^A-Za-z0-9_.]")
log = logging.getLogger("agentctx.context.artifacts.s3")


def parse_store_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://bucket/prefix``; the prefix ends in "/" unless empty."""
    parsed = urllib.parse.urlsplit(url)
    prefix = parsed.path.strip("/")
    return parsed.netloc, f"{prefix}/" if prefix else ""


# What an S3 call can fail with (anything else is a bug, raised as it is).
_FAILURES = (ClientError, BotoCoreError, aiohttp.ClientError, asyncio.TimeoutError, OSError)


def classify(exc: Exception, operation: str) -> Exception:
    """What an S3 call's failure means to callers: BlobNotFound, or
    Unavailable with a retry delay."""
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", "") or exc.response.get(
            "ResponseMetadata", {}).get("HTTPStatusCode", "unknown"))
        if code in _MISSING:
            return BlobNotFound()
        error_type = code
        retry_after = 2.0 if code in _THROTTLED else 1.0
    else:
        error_type, retry_after = type(exc).__name__, 1.0
    error_type = _SAFE_TYPE.sub("", error_type)[:64] or "unknown"
    log.warning("artifact object store call failed", extra={"operation": operation, "error_type": error_type})
    return Unavailable(
        "the artifact object store is unavailable; retry",
        reason=Reason.ARTIFACT_STORE_UNAVAILABLE, retry_after=retry_after, metadata={"error_type": error_type},
    )


def _reraise(exc: Exception, operation: str) -> NoReturn:
    """Raises ``exc`` classified, without its chain: its text can name the
    bucket and keys."""
    raise classify(exc, operation) from None


class _S3Writer:
    """A save: the bytes gathered up to one part; a PutObject at the end
    when they never reach a part, a multipart upload otherwise, its parts
    sent while the next one gathers (at most one in flight)."""

    def __init__(self, blobs: S3BlobStore, object_key: str) -> None:
        self._blobs, self._key = blobs, object_key
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._sending: asyncio.Task[None] | None = None
        self._stored = False

    async def write(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) >= self._blobs.part_bytes:
            await self._ship()

    async def _ship(self) -> None:
        blobs = self._blobs
        if self._upload_id is None:
            created = await blobs.call("create_multipart_upload", Bucket=blobs.bucket, Key=self._key)
            self._upload_id = created["UploadId"]
        data, self._buffer = self._buffer, bytearray()  # handed over, not copied
        await self._sent()
        self._sending = asyncio.ensure_future(self._send(len(self._parts) + 1, data))

    async def _send(self, number: int, data: bytearray) -> None:
        part = await self._upload_call("upload_part", PartNumber=number, Body=data)
        self._parts.append({"PartNumber": number, "ETag": part["ETag"]})

    async def _upload_call(self, operation: str, **params: Any) -> Any:
        """A call on the multipart upload; NoSuchUpload means the collector
        took it (the save ran past the grace period): ABORTED."""
        blobs = self._blobs
        try:
            return await blobs.call(operation, Bucket=blobs.bucket, Key=self._key, UploadId=self._upload_id, **params)
        except BlobNotFound:
            raise Aborted("the upload took too long and was collected; save the artifact again") from None

    async def _sent(self) -> None:
        """Waits for the part in flight (raising its failure)."""
        sending, self._sending = self._sending, None
        if sending is not None:
            await sending

    async def finish(self) -> int:
        blobs = self._blobs
        if self._upload_id is None:
            data, self._buffer = self._buffer, bytearray()  # handed over, not copied
            await blobs.call("put_object", Bucket=blobs.bucket, Key=self._key, Body=data)
            self._stored = True
            return 1
        if self._buffer:
            await self._ship()
        await self._sent()
        await self._upload_call("complete_multipart_upload", MultipartUpload={"Parts": self._parts})
        self._stored = True
        return len(self._parts)

    async def abort(self) -> None:
        self._buffer = bytearray()
        if self._sending is not None:
            self._sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sending
            self._sending = None
        blobs = self._blobs
        if self._upload_id is not None and not self._stored:
            with contextlib.suppress(BlobNotFound):
                await blobs.call("abort_multipart_upload", Bucket=blobs.bucket, Key=self._key,
                                 UploadId=self._upload_id)
        await blobs.call("delete_object", Bucket=blobs.bucket, Key=self._key)


class S3BlobStore:
    kind = S3_KIND
    lists_uploads = False

    def __init__(self, client: S3Client, bucket: str, prefix: str, *, part_bytes: int,
                 stack: contextlib.AsyncExitStack) -> None:
        self._client, self.bucket, self.prefix, self.part_bytes = client, bucket, prefix, part_bytes
        self._stack = stack

    @classmethod
    async def open(cls, settings: ContextSettings) -> S3BlobStore:
        assert settings.artifact_store_url is not None
        bucket, prefix = parse_store_url(settings.artifact_store_url)
        key_id, secret = settings.artifact_s3_access_key_id, settings.artifact_s3_secret_access_key
        config = AioConfig(
            connect_timeout=settings.artifact_s3_timeout_s, read_timeout=settings.artifact_s3_timeout_s,
            retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=64,
            # An endpoint of one's own (MinIO, moto, Ceph) is addressed by path.
            s3={"addressing_style": "path" if settings.artifact_s3_endpoint_url else "auto"},
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
        )
        stack = contextlib.AsyncExitStack()
        client = await stack.enter_async_context(get_session().create_client(
            "s3", region_name=settings.artifact_s3_region, endpoint_url=settings.artifact_s3_endpoint_url,
            aws_access_key_id=key_id.get_secret_value() if key_id else None,
            aws_secret_access_key=secret.get_secret_value() if secret else None, config=config,
        ))
        blobs = cls(client, bucket, prefix, part_bytes=settings.artifact_s3_part_bytes, stack=stack)
        try:
            await blobs.check()
        except BaseException:
            await stack.aclose()
            raise
        return blobs

    async def check(self) -> None:
        """At start: a bucket that does not exist or refuses these
        credentials is a ConfigError; an unreachable store only a warning
        (saves and loads answer UNAVAILABLE until it is back)."""
        try:
            await self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _REFUSED:
                raise ConfigError(f"artifact_store_url: the bucket does not exist or refuses these credentials "
                                  f"({_SAFE_TYPE.sub('', code)})") from None
            classify(exc, "head_bucket")
        except _FAILURES as exc:
            classify(exc, "head_bucket")

    def object_key(self, app: str, key: str) -> str:
        return f"{self.prefix}{urllib.parse.quote(app, safe='')}/{key}"

    def _split(self, object_key: str) -> tuple[str, str] | None:
        app, _, key = object_key[len(self.prefix):].partition("/")
        return (urllib.parse.unquote(app), key) if key and "/" not in key else None

    async def call(self, operation: str, **params: Any) -> Any:
        try:
            return await getattr(self._client, operation)(**params)
        except _FAILURES as exc:
            _reraise(exc, operation)

    def writer(self, app: str, key: str) -> _S3Writer:
        return _S3Writer(self, self.object_key(app, key))

    async def read(self, app: str, key: str, size: int, parts: int) -> AsyncIterator[bytes]:
        del parts
        if not size:
            return
        # One GET, its body read as the client takes the chunks: no round
        # trip per range, and the HTTP client's flow control bounds what
        # is buffered here.
        reply = await self.call("get_object", Bucket=self.bucket, Key=self.object_key(app, key))
        body = reply["Body"]
        sent = 0
        try:
            async for chunk in self._chunks(body, size):
                sent += len(chunk)
                yield chunk
        finally:
            body.close()
        if sent != size:
            raise BlobNotFound()

    @staticmethod
    async def _chunks(body: Any, length: int) -> AsyncIterator[bytes]:
        """``length`` bytes of a response body in CHUNK_BYTES chunks (the
        last shorter): pieces as they come, joined once per chunk."""
        pieces: list[bytes] = []
        held = 0
        while length:
            try:
                piece = await body.read(min(CHUNK_BYTES - held, length))
            except _FAILURES as exc:
                _reraise(exc, "get_object")
            if not piece:
                break
            pieces.append(piece)
            held += len(piece)
            length -= len(piece)
            if held == CHUNK_BYTES or not length:
                yield pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces, held = [], 0
        if pieces:
            yield b"".join(pieces)

    async def delete(self, app: str, key: str) -> None:
        object_key = self.object_key(app, key)
        listed = await self.call("list_multipart_uploads", Bucket=self.bucket, Prefix=object_key)
        for upload in listed.get("Uploads", []):
            if upload.get("Key") == object_key:
                with contextlib.suppress(BlobNotFound):
                    await self.call("abort_multipart_upload", Bucket=self.bucket, Key=object_key,
                                    UploadId=upload["UploadId"])
        await self.call("delete_object", Bucket=self.bucket, Key=object_key)

    async def keys(self) -> list[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for operation, field in (("list_objects_v2", "Contents"), ("list_multipart_uploads", "Uploads")):
            paginator = self._client.get_paginator(operation)  # type: ignore[call-overload]
            try:
                async for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                    for item in page.get(field, []):
                        split = self._split(item["Key"])
                        if split is not None:
                            found.add(split)
            except _FAILURES as exc:
                _reraise(exc, operation)
        return sorted(found)

    async def listing(self) -> AsyncIterator[list[StoredBytes]]:
        """Pages of list_objects_v2 under the prefix (S3 lists in key order,
        so each app's objects come together), then of list_multipart_uploads.
        What is not ``{app}/{key}`` under the prefix comes with app "" and
        the whole key."""
        for operation, field in (("list_objects_v2", "Contents"), ("list_multipart_uploads", "Uploads")):
            paginator = self._client.get_paginator(operation)  # type: ignore[call-overload]
            try:
                async for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                    items = [self._stored(item) for item in page.get(field, [])]
                    if items:
                        yield items
            except _FAILURES as exc:
                _reraise(exc, operation)

    def _stored(self, item: dict[str, Any]) -> StoredBytes:
        split = self._split(item["Key"])
        # A key that does not map back to itself (another quoting of the
        # app, a name of someone else's) is foreign: app "".
        app, key = split if split is not None and self.object_key(*split) == item["Key"] else ("", item["Key"])
        if "UploadId" in item:
            return StoredBytes(app, key, 0, item["Initiated"], item["UploadId"])
        return StoredBytes(app, key, int(item.get("Size", 0)), item["LastModified"])

    async def exists(self, item: StoredBytes) -> bool:
        object_key = self.object_key(item.app, item.key)
        try:
            if item.upload_id is None:
                await self.call("head_object", Bucket=self.bucket, Key=object_key)
            else:
                await self.call("list_parts", Bucket=self.bucket, Key=object_key, UploadId=item.upload_id, MaxParts=1)
        except BlobNotFound:
            return False
        return True

    async def remove(self, item: StoredBytes) -> None:
        object_key = self.object_key(item.app, item.key)
        if item.upload_id is None:
            await self.call("delete_object", Bucket=self.bucket, Key=object_key)
            return
        with contextlib.suppress(BlobNotFound):
            await self.call("abort_multipart_upload", Bucket=self.bucket, Key=object_key, UploadId=item.upload_id)

    async def close(self) -> None:
        await self._stack.aclose()
