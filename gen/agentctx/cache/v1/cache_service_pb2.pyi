import datetime

from agentctx.type.v1 import cache_pb2 as _cache_pb2
from agentctx.type.v1 import content_pb2 as _content_pb2
from agentctx.type.v1 import generation_pb2 as _generation_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbedTask(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBED_TASK_UNSPECIFIED: _ClassVar[EmbedTask]
    EMBED_TASK_RETRIEVAL_DOCUMENT: _ClassVar[EmbedTask]
    EMBED_TASK_RETRIEVAL_QUERY: _ClassVar[EmbedTask]
EMBED_TASK_UNSPECIFIED: EmbedTask
EMBED_TASK_RETRIEVAL_DOCUMENT: EmbedTask
EMBED_TASK_RETRIEVAL_QUERY: EmbedTask

class CacheScope(_message.Message):
    __slots__ = ("provider", "app", "user", "model", "policy")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    APP_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    provider: str
    app: str
    user: str
    model: str
    policy: _struct_pb2.Struct
    def __init__(self, provider: _Optional[str] = ..., app: _Optional[str] = ..., user: _Optional[str] = ..., model: _Optional[str] = ..., policy: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CachePrefix(_message.Message):
    __slots__ = ("system_instruction", "tools", "tool_config", "history")
    SYSTEM_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    system_instruction: _content_pb2.Content
    tools: _containers.RepeatedCompositeFieldContainer[_generation_pb2.Tool]
    tool_config: _generation_pb2.ToolConfig
    history: _containers.RepeatedCompositeFieldContainer[_content_pb2.Content]
    def __init__(self, system_instruction: _Optional[_Union[_content_pb2.Content, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_generation_pb2.Tool, _Mapping]]] = ..., tool_config: _Optional[_Union[_generation_pb2.ToolConfig, _Mapping]] = ..., history: _Optional[_Iterable[_Union[_content_pb2.Content, _Mapping]]] = ...) -> None: ...

class AcquireLeaseRequest(_message.Message):
    __slots__ = ("scope", "prefix", "ttl", "holder", "request_tokens")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TOKENS_FIELD_NUMBER: _ClassVar[int]
    scope: CacheScope
    prefix: CachePrefix
    ttl: _duration_pb2.Duration
    holder: str
    request_tokens: int
    def __init__(self, scope: _Optional[_Union[CacheScope, _Mapping]] = ..., prefix: _Optional[_Union[CachePrefix, _Mapping]] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., holder: _Optional[str] = ..., request_tokens: _Optional[int] = ...) -> None: ...

class AcquireLeaseResponse(_message.Message):
    __slots__ = ("lease", "metadata")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    lease: str
    metadata: _cache_pb2.CacheMetadata
    def __init__(self, lease: _Optional[str] = ..., metadata: _Optional[_Union[_cache_pb2.CacheMetadata, _Mapping]] = ...) -> None: ...

class ResolveLeaseRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: str
    def __init__(self, lease: _Optional[str] = ...) -> None: ...

class ResolveLeaseResponse(_message.Message):
    __slots__ = ("valid", "metadata", "invalid_reason")
    VALID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    INVALID_REASON_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    metadata: _cache_pb2.CacheMetadata
    invalid_reason: str
    def __init__(self, valid: _Optional[bool] = ..., metadata: _Optional[_Union[_cache_pb2.CacheMetadata, _Mapping]] = ..., invalid_reason: _Optional[str] = ...) -> None: ...

class ReleaseLeaseRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: str
    def __init__(self, lease: _Optional[str] = ...) -> None: ...

class ReleaseLeaseResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class GenerateContentRequest(_message.Message):
    __slots__ = ("scope", "request", "lease", "acquire")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    scope: CacheScope
    request: _generation_pb2.ModelRequest
    lease: str
    acquire: CallLease
    def __init__(self, scope: _Optional[_Union[CacheScope, _Mapping]] = ..., request: _Optional[_Union[_generation_pb2.ModelRequest, _Mapping]] = ..., lease: _Optional[str] = ..., acquire: _Optional[_Union[CallLease, _Mapping]] = ...) -> None: ...

class CallLease(_message.Message):
    __slots__ = ("suffix_contents", "ttl", "holder")
    SUFFIX_CONTENTS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    suffix_contents: int
    ttl: _duration_pb2.Duration
    holder: str
    def __init__(self, suffix_contents: _Optional[int] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., holder: _Optional[str] = ...) -> None: ...

class GenerateContentResponse(_message.Message):
    __slots__ = ("response", "cache")
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    response: _generation_pb2.ModelResponse
    cache: _cache_pb2.CacheMetadata
    def __init__(self, response: _Optional[_Union[_generation_pb2.ModelResponse, _Mapping]] = ..., cache: _Optional[_Union[_cache_pb2.CacheMetadata, _Mapping]] = ...) -> None: ...

class StreamGenerateContentRequest(_message.Message):
    __slots__ = ("call",)
    CALL_FIELD_NUMBER: _ClassVar[int]
    call: GenerateContentRequest
    def __init__(self, call: _Optional[_Union[GenerateContentRequest, _Mapping]] = ...) -> None: ...

class StreamGenerateContentResponse(_message.Message):
    __slots__ = ("chunk", "cache")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    chunk: _generation_pb2.ModelResponse
    cache: _cache_pb2.CacheMetadata
    def __init__(self, chunk: _Optional[_Union[_generation_pb2.ModelResponse, _Mapping]] = ..., cache: _Optional[_Union[_cache_pb2.CacheMetadata, _Mapping]] = ...) -> None: ...

class InvalidateScopeRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: CacheScope
    def __init__(self, scope: _Optional[_Union[CacheScope, _Mapping]] = ...) -> None: ...

class InvalidateScopeResponse(_message.Message):
    __slots__ = ("entries_removed", "inflight_cancelled", "scope_fingerprint")
    ENTRIES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    entries_removed: int
    inflight_cancelled: int
    scope_fingerprint: str
    def __init__(self, entries_removed: _Optional[int] = ..., inflight_cancelled: _Optional[int] = ..., scope_fingerprint: _Optional[str] = ...) -> None: ...

class GetScopeStatusRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: CacheScope
    def __init__(self, scope: _Optional[_Union[CacheScope, _Mapping]] = ...) -> None: ...

class GetScopeStatusResponse(_message.Message):
    __slots__ = ("scope_fingerprint", "entry_count", "inflight_count", "waiter_count", "prefix_bytes")
    SCOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_COUNT_FIELD_NUMBER: _ClassVar[int]
    WAITER_COUNT_FIELD_NUMBER: _ClassVar[int]
    PREFIX_BYTES_FIELD_NUMBER: _ClassVar[int]
    scope_fingerprint: str
    entry_count: int
    inflight_count: int
    waiter_count: int
    prefix_bytes: int
    def __init__(self, scope_fingerprint: _Optional[str] = ..., entry_count: _Optional[int] = ..., inflight_count: _Optional[int] = ..., waiter_count: _Optional[int] = ..., prefix_bytes: _Optional[int] = ...) -> None: ...

class EmbedRequest(_message.Message):
    __slots__ = ("provider", "model", "texts", "task", "dimensions")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    texts: _containers.RepeatedScalarFieldContainer[str]
    task: EmbedTask
    dimensions: int
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., texts: _Optional[_Iterable[str]] = ..., task: _Optional[_Union[EmbedTask, str]] = ..., dimensions: _Optional[int] = ...) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("embeddings", "model", "input_tokens")
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    model: str
    input_tokens: int
    def __init__(self, embeddings: _Optional[_Iterable[_Union[Embedding, _Mapping]]] = ..., model: _Optional[str] = ..., input_tokens: _Optional[int] = ...) -> None: ...
