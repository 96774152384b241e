import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryRanking(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_RANKING_UNSPECIFIED: _ClassVar[MemoryRanking]
    MEMORY_RANKING_LEXICAL: _ClassVar[MemoryRanking]
    MEMORY_RANKING_FUSED: _ClassVar[MemoryRanking]
MEMORY_RANKING_UNSPECIFIED: MemoryRanking
MEMORY_RANKING_LEXICAL: MemoryRanking
MEMORY_RANKING_FUSED: MemoryRanking

class MemoryEntry(_message.Message):
    __slots__ = ("name", "text", "metadata", "session", "event_id", "author", "create_time")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    text: str
    metadata: _containers.ScalarMap[str, str]
    session: str
    event_id: str
    author: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., text: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., session: _Optional[str] = ..., event_id: _Optional[str] = ..., author: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AddSessionToMemoryRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class AddSessionToMemoryResponse(_message.Message):
    __slots__ = ("added_count", "existing_count")
    ADDED_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXISTING_COUNT_FIELD_NUMBER: _ClassVar[int]
    added_count: int
    existing_count: int
    def __init__(self, added_count: _Optional[int] = ..., existing_count: _Optional[int] = ...) -> None: ...

class AddMemoryRequest(_message.Message):
    __slots__ = ("parent", "memory", "memory_id")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    parent: str
    memory: MemoryEntry
    memory_id: str
    def __init__(self, parent: _Optional[str] = ..., memory: _Optional[_Union[MemoryEntry, _Mapping]] = ..., memory_id: _Optional[str] = ...) -> None: ...

class SearchMemoryRequest(_message.Message):
    __slots__ = ("parent", "query", "metadata_filter", "limit")
    class MetadataFilterEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PARENT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FILTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    query: str
    metadata_filter: _containers.ScalarMap[str, str]
    limit: int
    def __init__(self, parent: _Optional[str] = ..., query: _Optional[str] = ..., metadata_filter: _Optional[_Mapping[str, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class SearchMemoryResponse(_message.Message):
    __slots__ = ("matches", "ranking", "semantic_unavailable")
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    RANKING_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[MemoryMatch]
    ranking: MemoryRanking
    semantic_unavailable: bool
    def __init__(self, matches: _Optional[_Iterable[_Union[MemoryMatch, _Mapping]]] = ..., ranking: _Optional[_Union[MemoryRanking, str]] = ..., semantic_unavailable: _Optional[bool] = ...) -> None: ...

class MemoryMatch(_message.Message):
    __slots__ = ("memory", "score", "lexical_rank", "vector_rank", "vector_score")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RANK_FIELD_NUMBER: _ClassVar[int]
    VECTOR_RANK_FIELD_NUMBER: _ClassVar[int]
    VECTOR_SCORE_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryEntry
    score: float
    lexical_rank: int
    vector_rank: int
    vector_score: float
    def __init__(self, memory: _Optional[_Union[MemoryEntry, _Mapping]] = ..., score: _Optional[float] = ..., lexical_rank: _Optional[int] = ..., vector_rank: _Optional[int] = ..., vector_score: _Optional[float] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...
