import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CacheState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CACHE_STATE_UNSPECIFIED: _ClassVar[CacheState]
    CACHE_STATE_CREATED: _ClassVar[CacheState]
    CACHE_STATE_HIT: _ClassVar[CacheState]
    CACHE_STATE_GROWN: _ClassVar[CacheState]
    CACHE_STATE_BYPASS: _ClassVar[CacheState]

class CacheBypassReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CACHE_BYPASS_REASON_UNSPECIFIED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_DISABLED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_FIRST_SIGHTING: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_BELOW_MIN_TOKENS: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_EMPTY_PREFIX: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_CREATE_FAILED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_RATE_LIMITED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_DEADLINE_EXCEEDED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_CAPACITY: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_CACHE_MISSING: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_INVALIDATED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_UNAVAILABLE: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_UNSUPPORTED: _ClassVar[CacheBypassReason]
    CACHE_BYPASS_REASON_REGISTRY_UNAVAILABLE: _ClassVar[CacheBypassReason]
CACHE_STATE_UNSPECIFIED: CacheState
CACHE_STATE_CREATED: CacheState
CACHE_STATE_HIT: CacheState
CACHE_STATE_GROWN: CacheState
CACHE_STATE_BYPASS: CacheState
CACHE_BYPASS_REASON_UNSPECIFIED: CacheBypassReason
CACHE_BYPASS_REASON_DISABLED: CacheBypassReason
CACHE_BYPASS_REASON_FIRST_SIGHTING: CacheBypassReason
CACHE_BYPASS_REASON_BELOW_MIN_TOKENS: CacheBypassReason
CACHE_BYPASS_REASON_EMPTY_PREFIX: CacheBypassReason
CACHE_BYPASS_REASON_CREATE_FAILED: CacheBypassReason
CACHE_BYPASS_REASON_RATE_LIMITED: CacheBypassReason
CACHE_BYPASS_REASON_DEADLINE_EXCEEDED: CacheBypassReason
CACHE_BYPASS_REASON_CAPACITY: CacheBypassReason
CACHE_BYPASS_REASON_CACHE_MISSING: CacheBypassReason
CACHE_BYPASS_REASON_INVALIDATED: CacheBypassReason
CACHE_BYPASS_REASON_UNAVAILABLE: CacheBypassReason
CACHE_BYPASS_REASON_UNSUPPORTED: CacheBypassReason
CACHE_BYPASS_REASON_REGISTRY_UNAVAILABLE: CacheBypassReason

class CacheMetadata(_message.Message):
    __slots__ = ("state", "bypass_reason", "prefix_fingerprint", "prefix_tokens", "expire_time", "scope_fingerprint", "uses")
    STATE_FIELD_NUMBER: _ClassVar[int]
    BYPASS_REASON_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    state: CacheState
    bypass_reason: CacheBypassReason
    prefix_fingerprint: str
    prefix_tokens: int
    expire_time: _timestamp_pb2.Timestamp
    scope_fingerprint: str
    uses: int
    def __init__(self, state: _Optional[_Union[CacheState, str]] = ..., bypass_reason: _Optional[_Union[CacheBypassReason, str]] = ..., prefix_fingerprint: _Optional[str] = ..., prefix_tokens: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scope_fingerprint: _Optional[str] = ..., uses: _Optional[int] = ...) -> None: ...
