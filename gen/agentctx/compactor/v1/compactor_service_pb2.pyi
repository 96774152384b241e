from agentctx.type.v1 import event_pb2 as _event_pb2
from agentctx.type.v1 import generation_pb2 as _generation_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompactRequest(_message.Message):
    __slots__ = ("session", "events", "previous_summary", "instructions", "max_summary_bytes")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_SUMMARY_BYTES_FIELD_NUMBER: _ClassVar[int]
    session: str
    events: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    previous_summary: str
    instructions: str
    max_summary_bytes: int
    def __init__(self, session: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ..., previous_summary: _Optional[str] = ..., instructions: _Optional[str] = ..., max_summary_bytes: _Optional[int] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ("summary", "usage")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    summary: str
    usage: _generation_pb2.Usage
    def __init__(self, summary: _Optional[str] = ..., usage: _Optional[_Union[_generation_pb2.Usage, _Mapping]] = ...) -> None: ...
