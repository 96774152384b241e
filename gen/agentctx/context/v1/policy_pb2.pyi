import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OverflowMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERFLOW_MODE_UNSPECIFIED: _ClassVar[OverflowMode]
    OVERFLOW_MODE_TRUNCATE: _ClassVar[OverflowMode]
    OVERFLOW_MODE_ERROR: _ClassVar[OverflowMode]
    OVERFLOW_MODE_COMPRESS: _ClassVar[OverflowMode]

class ContentType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTENT_TYPE_UNSPECIFIED: _ClassVar[ContentType]
    CONTENT_TYPE_TEXT: _ClassVar[ContentType]
    CONTENT_TYPE_INLINE_DATA: _ClassVar[ContentType]
    CONTENT_TYPE_FILE_DATA: _ClassVar[ContentType]
    CONTENT_TYPE_FUNCTION_CALL: _ClassVar[ContentType]
    CONTENT_TYPE_FUNCTION_RESPONSE: _ClassVar[ContentType]
    CONTENT_TYPE_THOUGHT: _ClassVar[ContentType]

class CompactorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPACTOR_KIND_UNSPECIFIED: _ClassVar[CompactorKind]
    COMPACTOR_KIND_EXTRACTIVE: _ClassVar[CompactorKind]
    COMPACTOR_KIND_MODEL: _ClassVar[CompactorKind]
    COMPACTOR_KIND_REMOTE: _ClassVar[CompactorKind]
OVERFLOW_MODE_UNSPECIFIED: OverflowMode
OVERFLOW_MODE_TRUNCATE: OverflowMode
OVERFLOW_MODE_ERROR: OverflowMode
OVERFLOW_MODE_COMPRESS: OverflowMode
CONTENT_TYPE_UNSPECIFIED: ContentType
CONTENT_TYPE_TEXT: ContentType
CONTENT_TYPE_INLINE_DATA: ContentType
CONTENT_TYPE_FILE_DATA: ContentType
CONTENT_TYPE_FUNCTION_CALL: ContentType
CONTENT_TYPE_FUNCTION_RESPONSE: ContentType
CONTENT_TYPE_THOUGHT: ContentType
COMPACTOR_KIND_UNSPECIFIED: CompactorKind
COMPACTOR_KIND_EXTRACTIVE: CompactorKind
COMPACTOR_KIND_MODEL: CompactorKind
COMPACTOR_KIND_REMOTE: CompactorKind

class ContextConfig(_message.Message):
    __slots__ = ("model", "selection", "compaction", "cache", "retrieval", "tools")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    model: str
    selection: SelectionPolicy
    compaction: CompactionPolicy
    cache: CachePolicy
    retrieval: MemoryRetrievalPolicy
    tools: _containers.RepeatedCompositeFieldContainer[ToolDeclaration]
    def __init__(self, model: _Optional[str] = ..., selection: _Optional[_Union[SelectionPolicy, _Mapping]] = ..., compaction: _Optional[_Union[CompactionPolicy, _Mapping]] = ..., cache: _Optional[_Union[CachePolicy, _Mapping]] = ..., retrieval: _Optional[_Union[MemoryRetrievalPolicy, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[ToolDeclaration, _Mapping]]] = ...) -> None: ...

class ToolDeclaration(_message.Message):
    __slots__ = ("name", "capabilities")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ...) -> None: ...

class EventFilter(_message.Message):
    __slots__ = ("authors", "exclude_authors", "invocation_ids", "content_types", "start_time", "end_time", "include_partial", "final_only", "branch")
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_AUTHORS_FIELD_NUMBER: _ClassVar[int]
    INVOCATION_IDS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    FINAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    authors: _containers.RepeatedScalarFieldContainer[str]
    exclude_authors: _containers.RepeatedScalarFieldContainer[str]
    invocation_ids: _containers.RepeatedScalarFieldContainer[str]
    content_types: _containers.RepeatedScalarFieldContainer[ContentType]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    include_partial: bool
    final_only: bool
    branch: str
    def __init__(self, authors: _Optional[_Iterable[str]] = ..., exclude_authors: _Optional[_Iterable[str]] = ..., invocation_ids: _Optional[_Iterable[str]] = ..., content_types: _Optional[_Iterable[_Union[ContentType, str]]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., include_partial: _Optional[bool] = ..., final_only: _Optional[bool] = ..., branch: _Optional[str] = ...) -> None: ...

class SelectionPolicy(_message.Message):
    __slots__ = ("max_bytes", "max_tokens", "max_request_bytes", "max_request_tokens", "bytes_per_token", "overflow", "filter", "extra_secret_keys", "disable_calibration", "max_attachment_bytes", "max_attachment_tokens")
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    EXTRA_SECRET_KEYS_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CALIBRATION_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTACHMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTACHMENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_bytes: int
    max_tokens: int
    max_request_bytes: int
    max_request_tokens: int
    bytes_per_token: float
    overflow: OverflowMode
    filter: EventFilter
    extra_secret_keys: _containers.RepeatedScalarFieldContainer[str]
    disable_calibration: bool
    max_attachment_bytes: int
    max_attachment_tokens: int
    def __init__(self, max_bytes: _Optional[int] = ..., max_tokens: _Optional[int] = ..., max_request_bytes: _Optional[int] = ..., max_request_tokens: _Optional[int] = ..., bytes_per_token: _Optional[float] = ..., overflow: _Optional[_Union[OverflowMode, str]] = ..., filter: _Optional[_Union[EventFilter, _Mapping]] = ..., extra_secret_keys: _Optional[_Iterable[str]] = ..., disable_calibration: _Optional[bool] = ..., max_attachment_bytes: _Optional[int] = ..., max_attachment_tokens: _Optional[int] = ...) -> None: ...

class CompactionPolicy(_message.Message):
    __slots__ = ("enabled", "compactor", "remote_target", "context_window", "reserve_tokens", "keep_recent_tokens", "retain_recent_exchanges", "background_tokens", "event_threshold", "turn_interval", "overflow_keep_recent_tokens", "timeout", "max_input_bytes", "max_summary_bytes", "model")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    COMPACTOR_FIELD_NUMBER: _ClassVar[int]
    REMOTE_TARGET_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    RESERVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RETAIN_RECENT_EXCHANGES_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EVENT_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    TURN_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_KEEP_RECENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_INPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_SUMMARY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    compactor: CompactorKind
    remote_target: str
    context_window: int
    reserve_tokens: int
    keep_recent_tokens: int
    retain_recent_exchanges: int
    background_tokens: int
    event_threshold: int
    turn_interval: int
    overflow_keep_recent_tokens: int
    timeout: _duration_pb2.Duration
    max_input_bytes: int
    max_summary_bytes: int
    model: str
    def __init__(self, enabled: _Optional[bool] = ..., compactor: _Optional[_Union[CompactorKind, str]] = ..., remote_target: _Optional[str] = ..., context_window: _Optional[int] = ..., reserve_tokens: _Optional[int] = ..., keep_recent_tokens: _Optional[int] = ..., retain_recent_exchanges: _Optional[int] = ..., background_tokens: _Optional[int] = ..., event_threshold: _Optional[int] = ..., turn_interval: _Optional[int] = ..., overflow_keep_recent_tokens: _Optional[int] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_input_bytes: _Optional[int] = ..., max_summary_bytes: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...

class CachePolicy(_message.Message):
    __slots__ = ("enabled", "ttl", "scope_policy")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    SCOPE_POLICY_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    ttl: _duration_pb2.Duration
    scope_policy: _struct_pb2.Struct
    def __init__(self, enabled: _Optional[bool] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., scope_policy: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class MemoryRetrievalPolicy(_message.Message):
    __slots__ = ("enabled", "limit", "min_score")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    limit: int
    min_score: float
    def __init__(self, enabled: _Optional[bool] = ..., limit: _Optional[int] = ..., min_score: _Optional[float] = ...) -> None: ...
