"""ArtifactServicer: named, versioned artifacts of a session or a user.

Each RPC authenticates the caller, parses the parent, checks the caller may
use the app (another app's artifacts are PERMISSION_DENIED before anything
about them is looked up), validates the id (domain.artifacts) and calls the
artifact store. Content streams both ways in chunks of at most
``CHUNK_BYTES``: a save feeds the store chunk by chunk as messages arrive
(size bounded by max_artifact_bytes, digest computed on the way) and a
load reads one chunk row at a time, so no artifact is ever whole in this
process. Spans carry counts, sizes, versions and digests only, never ids,
names or bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import struct_pb2
from opentelemetry import metrics, trace

from agentctx.context.v1 import artifacts_pb2 as pb
from agentctx.context.v1 import artifacts_pb2_grpc
from agentctx.type.v1 import content_pb2
from agentctx_common.canonical import struct_to_dict
from agentctx_common.errors import AgentCtxError, FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.artifacts import (
    TEXT_MIME_TYPE,
    ArtifactScope,
    ArtifactVersionRecord,
    Chunker,
    ContentDigest,
    check_version,
    parse_parent,
    scope_of,
)
from context_service.domain.event_validation import state_violations
from context_service.domain.limits import raise_if
from context_service.domain.parts import data_of
from context_service.mapping.artifacts import version_to_proto
from context_service.mapping.convert import part_from_proto

if TYPE_CHECKING:
    from context_service.app import ContextApp

DEFAULT_MIME_TYPE = "application/octet-stream"
# What a failed save reads of the rest of its stream, at most.
DRAIN_TIMES = 16
DRAIN_S = 30.0
_meter = metrics.get_meter("agentctx.context.artifacts")
_bytes = _meter.create_counter("agentctx.artifact.bytes", unit="By", description="Artifact bytes saved and loaded.")


def _observe(operation: str, **figures: Any) -> None:
    """Content-free span attributes: sizes, counts, versions, digests."""
    span = trace.get_current_span()
    for name, value in figures.items():
        span.set_attribute(f"artifact.{name}", value)
    if "size_bytes" in figures:
        _bytes.add(figures["size_bytes"], {"operation": operation})


def _observe_record(operation: str, record: ArtifactVersionRecord) -> None:
    _observe(operation, size_bytes=record.size_bytes, version=record.version, sha256=record.sha256,
             user_scoped=record.scope.user_scoped, text=record.text)


async def drain(requests: AsyncIterator[Any], max_artifact_bytes: int) -> None:
    """Reads (and drops) what the client still sends of a failed save
    before the error status goes out: a grpc.aio client whose write meets
    an RPC the server has ended reports INTERNAL instead of the status
    (grpc/grpc#36066). Bounded: DRAIN_TIMES the largest artifact, DRAIN_S."""
    drained = 0
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DRAIN_S):
            async for message in requests:
                drained += message.ByteSize()
                if drained > DRAIN_TIMES * max_artifact_bytes:
                    break


class ArtifactServicer(artifacts_pb2_grpc.ArtifactServiceServicer):
    def __init__(self, app: ContextApp) -> None:
        self.app = app

    def _scope(self, context: grpc.aio.ServicerContext[Any, Any], parent: str, artifact: str,
               prefix: str = "") -> ArtifactScope:
        caller = self.app.caller(context)
        app, user, session = parse_parent(parent, self.app.limits, f"{prefix}parent")
        caller.require(app)
        return scope_of(app, user, session, artifact, f"{prefix}parent", f"{prefix}artifact")

    async def SaveArtifact(self, request_iterator: AsyncIterable[pb.SaveArtifactRequest],
                           context: grpc.aio.ServicerContext[Any, Any]) -> pb.SaveArtifactResponse:
        requests = aiter(request_iterator)
        try:
            return await self._save(requests, context)
        except AgentCtxError:
            await drain(requests, self.app.settings.max_artifact_bytes)
            raise

    async def _save(self, requests: AsyncIterator[pb.SaveArtifactRequest],
                    context: grpc.aio.ServicerContext[Any, Any]) -> pb.SaveArtifactResponse:
        first = await anext(requests, None)
        if first is None or first.WhichOneof("payload") != "header":
            raise InvalidArgument.fields([FieldViolation("header", "the first message must carry the header")])
        header = first.header
        scope = self._scope(context, header.parent, header.artifact, "header.")
        record = await save_stream(self.app, scope, header.artifact, header.part, header.custom_metadata, requests)
        return pb.SaveArtifactResponse(artifact=version_to_proto(record))

    async def LoadArtifact(self, request: pb.LoadArtifactRequest,
                           context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[pb.LoadArtifactResponse]:
        scope = self._scope(context, request.parent, request.artifact)
        version = request.version if request.HasField("version") else None
        check_version(version)
        record = await self.app.artifacts.get_version(scope, request.artifact, version)
        async for message in load_stream(self.app, record):
            yield message

    async def ListArtifactNames(self, request: pb.ListArtifactNamesRequest,
                                context: grpc.aio.ServicerContext[Any, Any]) -> pb.ListArtifactNamesResponse:
        caller = self.app.caller(context)
        app, user, session = parse_parent(request.parent, self.app.limits)
        caller.require(app)
        names = await self.app.artifacts.list_names(app, user, session)
        _observe("list", count=len(names))
        return pb.ListArtifactNamesResponse(artifacts=names)

    async def ListArtifactVersions(self, request: pb.ListArtifactVersionsRequest,
                                   context: grpc.aio.ServicerContext[Any, Any]) -> pb.ListArtifactVersionsResponse:
        scope = self._scope(context, request.parent, request.artifact)
        versions = await self.app.artifacts.list_versions(scope, request.artifact)
        _observe("list_versions", count=len(versions))
        return pb.ListArtifactVersionsResponse(versions=[version_to_proto(v) for v in versions])

    async def DeleteArtifact(self, request: pb.DeleteArtifactRequest,
                             context: grpc.aio.ServicerContext[Any, Any]) -> pb.DeleteArtifactResponse:
        scope = self._scope(context, request.parent, request.artifact)
        version = request.version if request.HasField("version") else None
        check_version(version)
        deleted = await self.app.artifacts.delete(scope, request.artifact, version)
        _observe("delete", count=deleted, user_scoped=scope.user_scoped)
        return pb.DeleteArtifactResponse(deleted_versions=deleted)


async def save_stream(app: ContextApp, scope: ArtifactScope, artifact: str, part: content_pb2.Part,
                      custom_metadata: struct_pb2.Struct, requests: AsyncIterator[Any], *,
                      staged_call: str | None = None) -> ArtifactVersionRecord:
    """Saves a header's part and the ``data`` of the messages after it,
    chunk by chunk as they arrive (SaveArtifact's and SaveToolArtifact's
    stream: ``staged_call`` stages the version against a tool call)."""
    data = data_of(part_from_proto(part))
    if data is None:
        raise InvalidArgument.fields([FieldViolation("header.part", "must be a text or an inline_data part")],
                                     reason=Reason.INVALID_CONTENT)
    text, mime_type, initial = data
    mime_type = TEXT_MIME_TYPE if text else mime_type or DEFAULT_MIME_TYPE
    metadata = struct_to_dict(custom_metadata)
    raise_if(state_violations(metadata, custom_metadata.ByteSize(), app.limits, "header.custom_metadata"))
    settings = app.settings
    digest = ContentDigest(settings.max_artifact_bytes, text=text)

    async def chunks() -> AsyncIterator[bytes]:
        chunker = Chunker()
        digest.update(initial)
        for chunk in chunker.feed(initial):
            yield chunk
        async for message in requests:
            if message.WhichOneof("payload") != "data":
                raise InvalidArgument.fields([FieldViolation("data", "only the first message carries a header")])
            digest.update(message.data)
            for chunk in chunker.feed(message.data):
                yield chunk
        for chunk in chunker.flush():
            yield chunk

    record = await app.artifacts.save(
        scope, artifact, mime_type=mime_type, text=text, custom_metadata=metadata, chunks=chunks(),
        digest=digest, quota_bytes=settings.artifact_quota_bytes_per_app, staged_call=staged_call,
    )
    _observe_record("save", record)
    return record


async def load_stream(app: ContextApp, record: ArtifactVersionRecord) -> AsyncIterator[pb.LoadArtifactResponse]:
    """A version's metadata, then its content one chunk at a time."""
    yield pb.LoadArtifactResponse(artifact=version_to_proto(record))
    chunks = 0
    async for chunk in app.artifacts.read_chunks(record):
        chunks += 1
        yield pb.LoadArtifactResponse(data=chunk)
    _observe_record("load", record)
    _observe("load", chunks=chunks)
