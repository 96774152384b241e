import datetime

from agentctx.context.v1 import policy_pb2 as _policy_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Session(_message.Message):
    __slots__ = ("name", "state", "config", "etag", "create_time", "update_time", "event_count", "last_sequence", "app_state", "user_state")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    APP_STATE_FIELD_NUMBER: _ClassVar[int]
    USER_STATE_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: _struct_pb2.Struct
    config: _policy_pb2.ContextConfig
    etag: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    event_count: int
    last_sequence: int
    app_state: _struct_pb2.Struct
    user_state: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., config: _Optional[_Union[_policy_pb2.ContextConfig, _Mapping]] = ..., etag: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., event_count: _Optional[int] = ..., last_sequence: _Optional[int] = ..., app_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., user_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StateDelta(_message.Message):
    __slots__ = ("session", "user", "app")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    APP_FIELD_NUMBER: _ClassVar[int]
    session: _struct_pb2.Struct
    user: _struct_pb2.Struct
    app: _struct_pb2.Struct
    def __init__(self, session: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., user: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., app: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
