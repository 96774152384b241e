import datetime

from agentctx.type.v1 import content_pb2 as _content_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ArtifactVersion(_message.Message):
    __slots__ = ("parent", "artifact", "version", "mime_type", "size_bytes", "sha256", "create_time", "custom_metadata", "text")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    artifact: str
    version: int
    mime_type: str
    size_bytes: int
    sha256: str
    create_time: _timestamp_pb2.Timestamp
    custom_metadata: _struct_pb2.Struct
    text: bool
    def __init__(self, parent: _Optional[str] = ..., artifact: _Optional[str] = ..., version: _Optional[int] = ..., mime_type: _Optional[str] = ..., size_bytes: _Optional[int] = ..., sha256: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., custom_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., text: _Optional[bool] = ...) -> None: ...

class SaveArtifactHeader(_message.Message):
    __slots__ = ("parent", "artifact", "part", "custom_metadata")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    parent: str
    artifact: str
    part: _content_pb2.Part
    custom_metadata: _struct_pb2.Struct
    def __init__(self, parent: _Optional[str] = ..., artifact: _Optional[str] = ..., part: _Optional[_Union[_content_pb2.Part, _Mapping]] = ..., custom_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SaveArtifactRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: SaveArtifactHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[SaveArtifactHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class SaveArtifactResponse(_message.Message):
    __slots__ = ("artifact",)
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: ArtifactVersion
    def __init__(self, artifact: _Optional[_Union[ArtifactVersion, _Mapping]] = ...) -> None: ...

class LoadArtifactRequest(_message.Message):
    __slots__ = ("parent", "artifact", "version")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    parent: str
    artifact: str
    version: int
    def __init__(self, parent: _Optional[str] = ..., artifact: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class LoadArtifactResponse(_message.Message):
    __slots__ = ("artifact", "data")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    artifact: ArtifactVersion
    data: bytes
    def __init__(self, artifact: _Optional[_Union[ArtifactVersion, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ListArtifactNamesRequest(_message.Message):
    __slots__ = ("parent",)
    PARENT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    def __init__(self, parent: _Optional[str] = ...) -> None: ...

class ListArtifactNamesResponse(_message.Message):
    __slots__ = ("artifacts",)
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    artifacts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, artifacts: _Optional[_Iterable[str]] = ...) -> None: ...

class ListArtifactVersionsRequest(_message.Message):
    __slots__ = ("parent", "artifact")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    artifact: str
    def __init__(self, parent: _Optional[str] = ..., artifact: _Optional[str] = ...) -> None: ...

class ListArtifactVersionsResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[ArtifactVersion]
    def __init__(self, versions: _Optional[_Iterable[_Union[ArtifactVersion, _Mapping]]] = ...) -> None: ...

class DeleteArtifactRequest(_message.Message):
    __slots__ = ("parent", "artifact", "version")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    parent: str
    artifact: str
    version: int
    def __init__(self, parent: _Optional[str] = ..., artifact: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class DeleteArtifactResponse(_message.Message):
    __slots__ = ("deleted_versions",)
    DELETED_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    deleted_versions: int
    def __init__(self, deleted_versions: _Optional[int] = ...) -> None: ...

class ArtifactRef(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...
