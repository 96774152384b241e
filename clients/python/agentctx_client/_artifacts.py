"""The ArtifactService's calls, mixed into ContextClient: named, versioned
artifacts of a session (or of its user, ids starting with "user:"), content
streamed in chunks both ways. ``save_stream`` and ``open_stream`` are the
streaming that ToolContext's artifact calls share."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from agentctx.context.v1 import artifacts_pb2 as apb
from agentctx.context.v1 import artifacts_pb2_grpc
from agentctx.type.v1 import content_pb2
from agentctx_client._errors import InternalError, error_from_rpc
from agentctx_client._retry import Calls, Deadline
from agentctx_client._types import JSON, Part, _dict, _struct, _time

USER_PREFIX = "user:"
CHUNK_BYTES = 1024 * 1024
DEFAULT_MIME_TYPE = "application/octet-stream"
ArtifactContent = str | bytes | Part | Iterable[bytes] | AsyncIterable[bytes]


def user_parent(app: str, user: str) -> str:
    """"apps/{app}/users/{user}": the parent of a user's "user:" artifacts."""
    return f"apps/{app}/users/{user}"


@dataclass(frozen=True)
class ArtifactVersion:
    """One saved version's metadata (never its content)."""

    parent: str
    artifact: str
    version: int
    mime_type: str
    size_bytes: int
    sha256: str
    create_time: datetime.datetime | None
    custom_metadata: JSON
    text: bool
    proto: apb.ArtifactVersion = field(compare=False, repr=False)

    @staticmethod
    def from_proto(v: apb.ArtifactVersion) -> ArtifactVersion:
        return ArtifactVersion(
            parent=v.parent, artifact=v.artifact, version=v.version, mime_type=v.mime_type, size_bytes=v.size_bytes,
            sha256=v.sha256, create_time=_time(v.create_time, v.HasField("create_time")),
            custom_metadata=_dict(v.custom_metadata), text=v.text, proto=v,
        )


@dataclass(frozen=True)
class ArtifactRef:
    """An artifact to attach to a request (``build_context``/``generate``
    ``attachments=``): an id of the session's artifacts, or of its user's
    ("user:..."), and a version (None: the latest)."""

    name: str
    version: int | None = None

    def to_proto(self) -> apb.ArtifactRef:
        return apb.ArtifactRef(name=self.name, version=self.version)


AttachmentLike = str | ArtifactRef | ArtifactVersion


def attachment_refs(attachments: Iterable[AttachmentLike]) -> list[apb.ArtifactRef]:
    """An id (the latest version), an ``ArtifactRef``, or the
    ``ArtifactVersion`` a save or a listing returned (that version)."""
    out = []
    for a in attachments:
        if isinstance(a, str):
            out.append(apb.ArtifactRef(name=a))
        elif isinstance(a, ArtifactVersion):
            out.append(apb.ArtifactRef(name=a.artifact, version=a.version))
        else:
            out.append(a.to_proto())
    return out


@dataclass(frozen=True)
class Artifact:
    """A loaded version: its metadata and its content as a Part (text, or
    inline data in ``part.proto.inline_data``); ``data`` is the content's
    bytes either way."""

    version: ArtifactVersion
    data: bytes

    @property
    def text(self) -> str | None:
        return self.data.decode() if self.version.text else None

    @property
    def part(self) -> Part:
        if self.version.text:
            return Part(text=self.data.decode())
        proto = content_pb2.Part(inline_data=content_pb2.Blob(mime_type=self.version.mime_type, data=self.data))
        return Part(proto=proto)


class ArtifactCalls(Calls):
    """ArtifactService methods; ``artifact_stub`` is its raw stub. A
    ``parent`` is a session name, or ``user_parent(app, user)`` for "user:"
    artifacts (which any session of the user names as well)."""

    channel: grpc.aio.Channel

    @property
    def artifact_stub(self) -> artifacts_pb2_grpc.ArtifactServiceStub:
        stub = self.__dict__.get("_artifact_stub")
        if stub is None:
            stub = self.__dict__["_artifact_stub"] = artifacts_pb2_grpc.ArtifactServiceStub(self.channel)
        return stub

    async def save_artifact(
        self, parent: str, artifact: str, content: ArtifactContent, *, mime_type: str = DEFAULT_MIME_TYPE,
        custom_metadata: JSON | None = None, chunk_bytes: int = CHUNK_BYTES, timeout: float | None = None,
    ) -> ArtifactVersion:
        """Saves ``content`` as the artifact's next version and returns it.
        A str is a text artifact; bytes, a Part with inline data, or an
        (async) iterable of bytes are inline data of ``mime_type`` (an
        iterable is streamed as it is read, never joined here). Not retried:
        a retry would save another version."""
        header = apb.SaveArtifactHeader(parent=parent, artifact=artifact, custom_metadata=_struct(custom_metadata))
        pieces = content_pieces(header.part, content, mime_type, chunk_bytes)
        return await save_stream(self.artifact_stub.SaveArtifact, apb.SaveArtifactRequest, header, pieces,
                                 Deadline(self.timeout if timeout is None else timeout), self.metadata)

    async def open_artifact(self, parent: str, artifact: str, *, version: int | None = None,
                            timeout: float | None = None) -> tuple[ArtifactVersion, AsyncIterator[bytes]]:
        """The version (the latest when ``version`` is None) and an iterator
        of its content's chunks, read from the server as you iterate."""
        deadline = Deadline(self.timeout if timeout is None else timeout)
        request = apb.LoadArtifactRequest(parent=parent, artifact=artifact, version=version)
        return await open_stream(self.artifact_stub.LoadArtifact(request, timeout=deadline.remaining(),
                                                                 metadata=self.metadata))

    async def load_artifact(self, parent: str, artifact: str, *, version: int | None = None,
                            timeout: float | None = None) -> Artifact:
        """One version (the latest when ``version`` is None), whole. Use
        ``open_artifact`` to stream a large one."""
        return await read_whole(self.open_artifact(parent, artifact, version=version, timeout=timeout))

    async def list_artifacts(self, parent: str, *, timeout: float | None = None) -> list[str]:
        """The artifact ids of a session (its own and its user's) or of a user."""
        response = await self._call(self.artifact_stub.ListArtifactNames,
                                    apb.ListArtifactNamesRequest(parent=parent), timeout)
        return list(response.artifacts)

    async def list_artifact_versions(self, parent: str, artifact: str, *,
                                     timeout: float | None = None) -> list[ArtifactVersion]:
        """Every version, oldest first, with mime type, size, sha256, create
        time and custom metadata."""
        response = await self._call(self.artifact_stub.ListArtifactVersions,
                                    apb.ListArtifactVersionsRequest(parent=parent, artifact=artifact), timeout)
        return [ArtifactVersion.from_proto(v) for v in response.versions]

    async def delete_artifact(self, parent: str, artifact: str, *, version: int | None = None,
                              timeout: float | None = None) -> int:
        """Deletes one version, or all (``version`` None); returns how many."""
        request = apb.DeleteArtifactRequest(parent=parent, artifact=artifact, version=version)
        response = await self._call(self.artifact_stub.DeleteArtifact, request, timeout)
        return int(response.deleted_versions)


# --- the streaming ArtifactService and ToolContextService share ---------------------------


class _SaveRequest(Protocol):
    """SaveArtifactRequest or SaveToolArtifactRequest: a header, then data."""

    def __init__(self, *, header: Any = ..., data: bytes = ...) -> None: ...


Pieces = Iterable[bytes] | AsyncIterable[bytes]


def content_pieces(part: content_pb2.Part, content: ArtifactContent, mime_type: str, chunk_bytes: int) -> Pieces:
    """Fills a save header's ``part`` (empty text, or inline data's mime
    type) for ``content`` and returns the content's bytes in pieces of at
    most ``chunk_bytes`` (an iterable of bytes is passed on as it is)."""
    if isinstance(content, str):
        part.text = ""
        return _slices(content.encode(), chunk_bytes)
    if isinstance(content, Part):
        proto = content.to_proto()
        if proto.WhichOneof("data") == "text":
            part.text = ""
            return _slices(proto.text.encode(), chunk_bytes)
        part.inline_data.mime_type = proto.inline_data.mime_type or mime_type
        return _slices(proto.inline_data.data, chunk_bytes)
    part.inline_data.mime_type = mime_type
    return _slices(content, chunk_bytes) if isinstance(content, bytes) else content


async def save_stream(rpc: Callable[..., Awaitable[apb.SaveArtifactResponse]], request_type: type[_SaveRequest],
                      header: Any, pieces: Pieces, deadline: Deadline,
                      metadata: tuple[tuple[str, str], ...]) -> ArtifactVersion:
    """Streams ``header`` then ``pieces`` to a client-streaming save RPC
    (SaveArtifact, SaveToolArtifact) and returns the saved version. Never
    retried: a retry would save another version."""
    async def requests() -> AsyncIterator[_SaveRequest]:
        yield request_type(header=header)
        if isinstance(pieces, AsyncIterable):
            async for piece in pieces:
                yield request_type(data=piece)
        else:
            for piece in pieces:
                yield request_type(data=piece)

    try:
        response = await rpc(requests(), timeout=deadline.remaining(), metadata=metadata)
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None
    return ArtifactVersion.from_proto(response.artifact)


async def open_stream(call: Any) -> tuple[ArtifactVersion, AsyncIterator[bytes]]:
    """The metadata a load stream (LoadArtifact, LoadToolArtifact) starts
    with, and an iterator of its content's chunks read as it is iterated;
    the call is cancelled when the iterator ends or is closed."""
    try:
        first = await call.read()
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None
    if first is grpc.aio.EOF or not first.HasField("artifact"):
        call.cancel()
        raise InternalError("the artifact stream did not start with its metadata")

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while (item := await call.read()) is not grpc.aio.EOF:
                yield item.data
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()

    return ArtifactVersion.from_proto(first.artifact), chunks()


async def read_whole(opened: Awaitable[tuple[ArtifactVersion, AsyncIterator[bytes]]]) -> Artifact:
    """An opened artifact read to its end."""
    meta, chunks = await opened
    return Artifact(meta, b"".join([chunk async for chunk in chunks]))


def _slices(data: bytes, size: int) -> Iterable[bytes]:
    view = memoryview(data)
    return (bytes(view[i:i + size]) for i in range(0, len(data), size))
