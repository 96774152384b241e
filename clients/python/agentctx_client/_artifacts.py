"""The ArtifactService's calls, mixed into ContextClient: named, versioned
artifacts of a session (or of its user, ids starting with "user:"), content
streamed in chunks both ways."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from agentctx.context.v1 import artifacts_pb2 as apb
from agentctx.context.v1 import artifacts_pb2_grpc
from agentctx.type.v1 import content_pb2
from agentctx_client._errors import InternalError, error_from_rpc
from agentctx_client._retry import Deadline
from agentctx_client._types import JSON, Part, _dict, _struct, _time

R = TypeVar("R")
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


class ArtifactCalls:
    """ArtifactService methods; ``artifact_stub`` is its raw stub. A
    ``parent`` is a session name, or ``user_parent(app, user)`` for "user:"
    artifacts (which any session of the user names as well)."""

    channel: grpc.aio.Channel
    timeout: float | None
    metadata: tuple[tuple[str, str], ...]

    _call: Callable[..., Awaitable[Any]]

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
        pieces: Iterable[bytes] | AsyncIterable[bytes]
        if isinstance(content, str):
            header.part.text = ""
            pieces = _slices(content.encode(), chunk_bytes)
        elif isinstance(content, Part):
            proto = content.to_proto()
            if proto.WhichOneof("data") == "text":
                header.part.text = ""
                pieces = _slices(proto.text.encode(), chunk_bytes)
            else:
                header.part.inline_data.mime_type = proto.inline_data.mime_type or mime_type
                pieces = _slices(proto.inline_data.data, chunk_bytes)
        else:
            header.part.inline_data.mime_type = mime_type
            pieces = _slices(content, chunk_bytes) if isinstance(content, bytes) else content

        async def requests() -> AsyncIterator[apb.SaveArtifactRequest]:
            yield apb.SaveArtifactRequest(header=header)
            if isinstance(pieces, AsyncIterable):
                async for piece in pieces:
                    yield apb.SaveArtifactRequest(data=piece)
            else:
                for piece in pieces:
                    yield apb.SaveArtifactRequest(data=piece)

        deadline = Deadline(self.timeout if timeout is None else timeout)
        try:
            response = await self.artifact_stub.SaveArtifact(
                requests(), timeout=deadline.remaining(), metadata=self.metadata
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        return ArtifactVersion.from_proto(response.artifact)

    async def open_artifact(self, parent: str, artifact: str, *, version: int | None = None,
                            timeout: float | None = None) -> tuple[ArtifactVersion, AsyncIterator[bytes]]:
        """The version (the latest when ``version`` is None) and an iterator
        of its content's chunks, read from the server as you iterate."""
        deadline = Deadline(self.timeout if timeout is None else timeout)
        request = apb.LoadArtifactRequest(parent=parent, artifact=artifact, version=version)
        call = self.artifact_stub.LoadArtifact(request, timeout=deadline.remaining(), metadata=self.metadata)
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

    async def load_artifact(self, parent: str, artifact: str, *, version: int | None = None,
                            timeout: float | None = None) -> Artifact:
        """One version (the latest when ``version`` is None), whole. Use
        ``open_artifact`` to stream a large one."""
        meta, chunks = await self.open_artifact(parent, artifact, version=version, timeout=timeout)
        return Artifact(meta, b"".join([chunk async for chunk in chunks]))

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


def _slices(data: bytes, size: int) -> Iterable[bytes]:
    view = memoryview(data)
    return (bytes(view[i:i + size]) for i in range(0, len(data), size))
