import datetime

from agentctx.type.v1 import cache_pb2 as _cache_pb2
from agentctx.type.v1 import content_pb2 as _content_pb2
from agentctx.type.v1 import generation_pb2 as _generation_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_MESSAGE: _ClassVar[EventKind]
    EVENT_KIND_COMPACTION: _ClassVar[EventKind]

class CompactionTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPACTION_TRIGGER_UNSPECIFIED: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_MANUAL: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_THRESHOLD: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_BACKGROUND: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_OVERFLOW: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_EVENT_COUNT: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_TURN_INTERVAL: _ClassVar[CompactionTrigger]
    COMPACTION_TRIGGER_COMPRESS: _ClassVar[CompactionTrigger]
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_MESSAGE: EventKind
EVENT_KIND_COMPACTION: EventKind
COMPACTION_TRIGGER_UNSPECIFIED: CompactionTrigger
COMPACTION_TRIGGER_MANUAL: CompactionTrigger
COMPACTION_TRIGGER_THRESHOLD: CompactionTrigger
COMPACTION_TRIGGER_BACKGROUND: CompactionTrigger
COMPACTION_TRIGGER_OVERFLOW: CompactionTrigger
COMPACTION_TRIGGER_EVENT_COUNT: CompactionTrigger
COMPACTION_TRIGGER_TURN_INTERVAL: CompactionTrigger
COMPACTION_TRIGGER_COMPRESS: CompactionTrigger

class Event(_message.Message):
    __slots__ = ("name", "id", "sequence", "invocation_id", "author", "branch", "content", "partial", "turn_complete", "create_time", "usage", "cache_metadata", "custom_metadata", "kind", "compaction", "long_running_tool_ids", "finish_reason", "model_version", "retracts_event_id", "error_code", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    TURN_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    CACHE_METADATA_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    LONG_RUNNING_TOOL_IDS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    RETRACTS_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    sequence: int
    invocation_id: str
    author: str
    branch: str
    content: _content_pb2.Content
    partial: bool
    turn_complete: bool
    create_time: _timestamp_pb2.Timestamp
    usage: _generation_pb2.Usage
    cache_metadata: _cache_pb2.CacheMetadata
    custom_metadata: _struct_pb2.Struct
    kind: EventKind
    compaction: Compaction
    long_running_tool_ids: _containers.RepeatedScalarFieldContainer[str]
    finish_reason: _generation_pb2.FinishReason
    model_version: str
    retracts_event_id: str
    error_code: str
    error_message: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., sequence: _Optional[int] = ..., invocation_id: _Optional[str] = ..., author: _Optional[str] = ..., branch: _Optional[str] = ..., content: _Optional[_Union[_content_pb2.Content, _Mapping]] = ..., partial: _Optional[bool] = ..., turn_complete: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., usage: _Optional[_Union[_generation_pb2.Usage, _Mapping]] = ..., cache_metadata: _Optional[_Union[_cache_pb2.CacheMetadata, _Mapping]] = ..., custom_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., kind: _Optional[_Union[EventKind, str]] = ..., compaction: _Optional[_Union[Compaction, _Mapping]] = ..., long_running_tool_ids: _Optional[_Iterable[str]] = ..., finish_reason: _Optional[_Union[_generation_pb2.FinishReason, str]] = ..., model_version: _Optional[str] = ..., retracts_event_id: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...

class Compaction(_message.Message):
    __slots__ = ("start_sequence", "end_sequence", "first_kept_event_id", "first_kept_sequence", "summary", "checkpoint", "summarizer_usage")
    START_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    END_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FIRST_KEPT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_KEPT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_USAGE_FIELD_NUMBER: _ClassVar[int]
    start_sequence: int
    end_sequence: int
    first_kept_event_id: str
    first_kept_sequence: int
    summary: str
    checkpoint: CompactionCheckpoint
    summarizer_usage: _generation_pb2.Usage
    def __init__(self, start_sequence: _Optional[int] = ..., end_sequence: _Optional[int] = ..., first_kept_event_id: _Optional[str] = ..., first_kept_sequence: _Optional[int] = ..., summary: _Optional[str] = ..., checkpoint: _Optional[_Union[CompactionCheckpoint, _Mapping]] = ..., summarizer_usage: _Optional[_Union[_generation_pb2.Usage, _Mapping]] = ...) -> None: ...

class CompactionCheckpoint(_message.Message):
    __slots__ = ("schema_version", "checkpoint_id", "trigger", "source_event_count", "source_first_event_id", "source_last_event_id", "source_first_time", "source_last_time", "source_fingerprint", "retained_event_count", "summary_bytes", "retained_user_turns", "compactor", "retained_tokens")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIRST_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LAST_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIRST_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LAST_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    RETAINED_EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETAINED_USER_TURNS_FIELD_NUMBER: _ClassVar[int]
    COMPACTOR_FIELD_NUMBER: _ClassVar[int]
    RETAINED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    checkpoint_id: str
    trigger: CompactionTrigger
    source_event_count: int
    source_first_event_id: str
    source_last_event_id: str
    source_first_time: _timestamp_pb2.Timestamp
    source_last_time: _timestamp_pb2.Timestamp
    source_fingerprint: str
    retained_event_count: int
    summary_bytes: int
    retained_user_turns: int
    compactor: str
    retained_tokens: int
    def __init__(self, schema_version: _Optional[int] = ..., checkpoint_id: _Optional[str] = ..., trigger: _Optional[_Union[CompactionTrigger, str]] = ..., source_event_count: _Optional[int] = ..., source_first_event_id: _Optional[str] = ..., source_last_event_id: _Optional[str] = ..., source_first_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source_last_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source_fingerprint: _Optional[str] = ..., retained_event_count: _Optional[int] = ..., summary_bytes: _Optional[int] = ..., retained_user_turns: _Optional[int] = ..., compactor: _Optional[str] = ..., retained_tokens: _Optional[int] = ...) -> None: ...
