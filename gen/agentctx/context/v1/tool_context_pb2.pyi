import datetime

from agentctx.context.v1 import artifacts_pb2 as _artifacts_pb2
from agentctx.context.v1 import session_pb2 as _session_pb2
from agentctx.memory.v1 import memory_service_pb2 as _memory_service_pb2
from agentctx.type.v1 import content_pb2 as _content_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolToken(_message.Message):
    __slots__ = ("function_call_id", "tool", "token", "capabilities", "expire_time")
    FUNCTION_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    function_call_id: str
    tool: str
    token: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, function_call_id: _Optional[str] = ..., tool: _Optional[str] = ..., token: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetToolIdentityRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolIdentity(_message.Message):
    __slots__ = ("app", "user", "session", "event_id", "function_call_id", "tool", "capabilities", "expire_time")
    APP_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    app: str
    user: str
    session: str
    event_id: str
    function_call_id: str
    tool: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, app: _Optional[str] = ..., user: _Optional[str] = ..., session: _Optional[str] = ..., event_id: _Optional[str] = ..., function_call_id: _Optional[str] = ..., tool: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetToolStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolState(_message.Message):
    __slots__ = ("state", "user_state", "app_state")
    STATE_FIELD_NUMBER: _ClassVar[int]
    USER_STATE_FIELD_NUMBER: _ClassVar[int]
    APP_STATE_FIELD_NUMBER: _ClassVar[int]
    state: _struct_pb2.Struct
    user_state: _struct_pb2.Struct
    app_state: _struct_pb2.Struct
    def __init__(self, state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., user_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., app_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UpdateToolStateRequest(_message.Message):
    __slots__ = ("state_delta",)
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    state_delta: _session_pb2.StateDelta
    def __init__(self, state_delta: _Optional[_Union[_session_pb2.StateDelta, _Mapping]] = ...) -> None: ...

class SaveToolArtifactHeader(_message.Message):
    __slots__ = ("artifact", "part", "custom_metadata")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    artifact: str
    part: _content_pb2.Part
    custom_metadata: _struct_pb2.Struct
    def __init__(self, artifact: _Optional[str] = ..., part: _Optional[_Union[_content_pb2.Part, _Mapping]] = ..., custom_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SaveToolArtifactRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: SaveToolArtifactHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[SaveToolArtifactHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class LoadToolArtifactRequest(_message.Message):
    __slots__ = ("artifact", "version")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    artifact: str
    version: int
    def __init__(self, artifact: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class ListToolArtifactNamesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListToolArtifactVersionsRequest(_message.Message):
    __slots__ = ("artifact",)
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: str
    def __init__(self, artifact: _Optional[str] = ...) -> None: ...

class DeleteToolArtifactRequest(_message.Message):
    __slots__ = ("artifact", "version")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    artifact: str
    version: int
    def __init__(self, artifact: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class AttachToolArtifactRequest(_message.Message):
    __slots__ = ("artifact", "version")
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    artifact: str
    version: int
    def __init__(self, artifact: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class SearchToolMemoryRequest(_message.Message):
    __slots__ = ("query", "metadata_filter", "limit")
    class MetadataFilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    QUERY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FILTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    query: str
    metadata_filter: _containers.ScalarMap[str, str]
    limit: int
    def __init__(self, query: _Optional[str] = ..., metadata_filter: _Optional[_Mapping[str, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class AddToolMemoryRequest(_message.Message):
    __slots__ = ("text", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    text: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, text: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeleteToolMemoryRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class MintToolTokensRequest(_message.Message):
    __slots__ = ("session", "event_id")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    session: str
    event_id: str
    def __init__(self, session: _Optional[str] = ..., event_id: _Optional[str] = ...) -> None: ...

class MintToolTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[ToolToken]
    def __init__(self, tokens: _Optional[_Iterable[_Union[ToolToken, _Mapping]]] = ...) -> None: ...
