import datetime

from agentctx.context.v1 import artifacts_pb2 as _artifacts_pb2
from agentctx.context.v1 import policy_pb2 as _policy_pb2
from agentctx.context.v1 import session_pb2 as _session_pb2
from agentctx.context.v1 import tool_context_pb2 as _tool_context_pb2
from agentctx.type.v1 import cache_pb2 as _cache_pb2
from agentctx.type.v1 import content_pb2 as _content_pb2
from agentctx.type.v1 import event_pb2 as _event_pb2
from agentctx.type.v1 import generation_pb2 as _generation_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TurnStorage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TURN_STORAGE_UNSPECIFIED: _ClassVar[TurnStorage]
    TURN_STORAGE_APPEND: _ClassVar[TurnStorage]
    TURN_STORAGE_NONE: _ClassVar[TurnStorage]
TURN_STORAGE_UNSPECIFIED: TurnStorage
TURN_STORAGE_APPEND: TurnStorage
TURN_STORAGE_NONE: TurnStorage

class CreateSessionRequest(_message.Message):
    __slots__ = ("parent", "session_id", "session")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    parent: str
    session_id: str
    session: _session_pb2.Session
    def __init__(self, parent: _Optional[str] = ..., session_id: _Optional[str] = ..., session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("parent", "page_size", "page_token", "order_by")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    parent: str
    page_size: int
    page_token: str
    order_by: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_session_pb2.Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[_session_pb2.Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateSessionRequest(_message.Message):
    __slots__ = ("session", "update_mask")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    session: _session_pb2.Session
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("name", "etag")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    name: str
    etag: str
    def __init__(self, name: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class GetSharedStateRequest(_message.Message):
    __slots__ = ("parent",)
    PARENT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    def __init__(self, parent: _Optional[str] = ...) -> None: ...

class SharedState(_message.Message):
    __slots__ = ("app_state", "user_state")
    APP_STATE_FIELD_NUMBER: _ClassVar[int]
    USER_STATE_FIELD_NUMBER: _ClassVar[int]
    app_state: _struct_pb2.Struct
    user_state: _struct_pb2.Struct
    def __init__(self, app_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., user_state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AppendEventRequest(_message.Message):
    __slots__ = ("parent", "event", "expected_etag", "state_delta")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ETAG_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    parent: str
    event: _event_pb2.Event
    expected_etag: str
    state_delta: _session_pb2.StateDelta
    def __init__(self, parent: _Optional[str] = ..., event: _Optional[_Union[_event_pb2.Event, _Mapping]] = ..., expected_etag: _Optional[str] = ..., state_delta: _Optional[_Union[_session_pb2.StateDelta, _Mapping]] = ...) -> None: ...

class BatchAppendEventsRequest(_message.Message):
    __slots__ = ("parent", "events")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    parent: str
    events: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    def __init__(self, parent: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ...) -> None: ...

class BatchAppendEventsResponse(_message.Message):
    __slots__ = ("events", "session_etag")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ETAG_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    session_etag: str
    def __init__(self, events: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ..., session_etag: _Optional[str] = ...) -> None: ...

class AppendEventResponse(_message.Message):
    __slots__ = ("event", "session_etag", "deduplicated", "session_update_time")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ETAG_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    SESSION_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.Event
    session_etag: str
    deduplicated: bool
    session_update_time: _timestamp_pb2.Timestamp
    def __init__(self, event: _Optional[_Union[_event_pb2.Event, _Mapping]] = ..., session_etag: _Optional[str] = ..., deduplicated: _Optional[bool] = ..., session_update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("parent", "page_size", "page_token", "include_compactions", "after_sequence", "after_time", "most_recent")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIME_FIELD_NUMBER: _ClassVar[int]
    MOST_RECENT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    page_size: int
    page_token: str
    include_compactions: bool
    after_sequence: int
    after_time: _timestamp_pb2.Timestamp
    most_recent: int
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_compactions: _Optional[bool] = ..., after_sequence: _Optional[int] = ..., after_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., most_recent: _Optional[int] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class BuildContextRequest(_message.Message):
    __slots__ = ("session", "input", "system_instruction", "tools", "tool_config", "generation_config", "memory", "policy", "model", "attachments")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    GENERATION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    session: str
    input: _containers.RepeatedCompositeFieldContainer[_content_pb2.Content]
    system_instruction: _content_pb2.Content
    tools: _containers.RepeatedCompositeFieldContainer[_generation_pb2.Tool]
    tool_config: _generation_pb2.ToolConfig
    generation_config: _generation_pb2.GenerationConfig
    memory: _containers.RepeatedCompositeFieldContainer[_content_pb2.Content]
    policy: _policy_pb2.SelectionPolicy
    model: str
    attachments: _containers.RepeatedCompositeFieldContainer[_artifacts_pb2.ArtifactRef]
    def __init__(self, session: _Optional[str] = ..., input: _Optional[_Iterable[_Union[_content_pb2.Content, _Mapping]]] = ..., system_instruction: _Optional[_Union[_content_pb2.Content, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_generation_pb2.Tool, _Mapping]]] = ..., tool_config: _Optional[_Union[_generation_pb2.ToolConfig, _Mapping]] = ..., generation_config: _Optional[_Union[_generation_pb2.GenerationConfig, _Mapping]] = ..., memory: _Optional[_Iterable[_Union[_content_pb2.Content, _Mapping]]] = ..., policy: _Optional[_Union[_policy_pb2.SelectionPolicy, _Mapping]] = ..., model: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[_artifacts_pb2.ArtifactRef, _Mapping]]] = ...) -> None: ...

class BudgetSection(_message.Message):
    __slots__ = ("bytes", "tokens")
    BYTES_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    tokens: int
    def __init__(self, bytes: _Optional[int] = ..., tokens: _Optional[int] = ...) -> None: ...

class ContextAccounting(_message.Message):
    __slots__ = ("events_seen", "events_filtered", "events_selected", "units_selected", "units_dropped", "secrets_pruned", "instructions", "settings", "history", "memory", "input", "tools", "framing", "request", "bytes_per_token", "calibrated", "prefix_fingerprint", "selection_fingerprint", "envelope_fingerprint", "compaction_sequence", "last_sequence", "compressed", "attachments")
    EVENTS_SEEN_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FILTERED_FIELD_NUMBER: _ClassVar[int]
    EVENTS_SELECTED_FIELD_NUMBER: _ClassVar[int]
    UNITS_SELECTED_FIELD_NUMBER: _ClassVar[int]
    UNITS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    SECRETS_PRUNED_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    FRAMING_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CALIBRATED_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    ENVELOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    events_seen: int
    events_filtered: int
    events_selected: int
    units_selected: int
    units_dropped: int
    secrets_pruned: int
    instructions: BudgetSection
    settings: BudgetSection
    history: BudgetSection
    memory: BudgetSection
    input: BudgetSection
    tools: BudgetSection
    framing: BudgetSection
    request: BudgetSection
    bytes_per_token: float
    calibrated: bool
    prefix_fingerprint: str
    selection_fingerprint: str
    envelope_fingerprint: str
    compaction_sequence: int
    last_sequence: int
    compressed: bool
    attachments: BudgetSection
    def __init__(self, events_seen: _Optional[int] = ..., events_filtered: _Optional[int] = ..., events_selected: _Optional[int] = ..., units_selected: _Optional[int] = ..., units_dropped: _Optional[int] = ..., secrets_pruned: _Optional[int] = ..., instructions: _Optional[_Union[BudgetSection, _Mapping]] = ..., settings: _Optional[_Union[BudgetSection, _Mapping]] = ..., history: _Optional[_Union[BudgetSection, _Mapping]] = ..., memory: _Optional[_Union[BudgetSection, _Mapping]] = ..., input: _Optional[_Union[BudgetSection, _Mapping]] = ..., tools: _Optional[_Union[BudgetSection, _Mapping]] = ..., framing: _Optional[_Union[BudgetSection, _Mapping]] = ..., request: _Optional[_Union[BudgetSection, _Mapping]] = ..., bytes_per_token: _Optional[float] = ..., calibrated: _Optional[bool] = ..., prefix_fingerprint: _Optional[str] = ..., selection_fingerprint: _Optional[str] = ..., envelope_fingerprint: _Optional[str] = ..., compaction_sequence: _Optional[int] = ..., last_sequence: _Optional[int] = ..., compressed: _Optional[bool] = ..., attachments: _Optional[_Union[BudgetSection, _Mapping]] = ...) -> None: ...

class BuildContextResponse(_message.Message):
    __slots__ = ("request", "accounting")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTING_FIELD_NUMBER: _ClassVar[int]
    request: _generation_pb2.ModelRequest
    accounting: ContextAccounting
    def __init__(self, request: _Optional[_Union[_generation_pb2.ModelRequest, _Mapping]] = ..., accounting: _Optional[_Union[ContextAccounting, _Mapping]] = ...) -> None: ...

class CompactSessionRequest(_message.Message):
    __slots__ = ("session", "instructions", "policy")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    session: str
    instructions: str
    policy: _policy_pb2.CompactionPolicy
    def __init__(self, session: _Optional[str] = ..., instructions: _Optional[str] = ..., policy: _Optional[_Union[_policy_pb2.CompactionPolicy, _Mapping]] = ...) -> None: ...

class CompactSessionResponse(_message.Message):
    __slots__ = ("compacted", "compaction", "kept_events", "kept_tokens", "kept_over_budget")
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    KEPT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    KEPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEPT_OVER_BUDGET_FIELD_NUMBER: _ClassVar[int]
    compacted: bool
    compaction: _event_pb2.Event
    kept_events: int
    kept_tokens: int
    kept_over_budget: bool
    def __init__(self, compacted: _Optional[bool] = ..., compaction: _Optional[_Union[_event_pb2.Event, _Mapping]] = ..., kept_events: _Optional[int] = ..., kept_tokens: _Optional[int] = ..., kept_over_budget: _Optional[bool] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("session", "input", "invocation_id", "reply_event_id", "system_instruction", "tools", "tool_config", "generation_config", "memory", "policy", "model", "agent", "storage", "attachments")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    GENERATION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    session: str
    input: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    invocation_id: str
    reply_event_id: str
    system_instruction: _content_pb2.Content
    tools: _containers.RepeatedCompositeFieldContainer[_generation_pb2.Tool]
    tool_config: _generation_pb2.ToolConfig
    generation_config: _generation_pb2.GenerationConfig
    memory: _containers.RepeatedCompositeFieldContainer[_content_pb2.Content]
    policy: _policy_pb2.SelectionPolicy
    model: str
    agent: str
    storage: TurnStorage
    attachments: _containers.RepeatedCompositeFieldContainer[_artifacts_pb2.ArtifactRef]
    def __init__(self, session: _Optional[str] = ..., input: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ..., invocation_id: _Optional[str] = ..., reply_event_id: _Optional[str] = ..., system_instruction: _Optional[_Union[_content_pb2.Content, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_generation_pb2.Tool, _Mapping]]] = ..., tool_config: _Optional[_Union[_generation_pb2.ToolConfig, _Mapping]] = ..., generation_config: _Optional[_Union[_generation_pb2.GenerationConfig, _Mapping]] = ..., memory: _Optional[_Iterable[_Union[_content_pb2.Content, _Mapping]]] = ..., policy: _Optional[_Union[_policy_pb2.SelectionPolicy, _Mapping]] = ..., model: _Optional[str] = ..., agent: _Optional[str] = ..., storage: _Optional[_Union[TurnStorage, str]] = ..., attachments: _Optional[_Iterable[_Union[_artifacts_pb2.ArtifactRef, _Mapping]]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("reply", "accounting", "compactions", "background_compaction_scheduled", "deduplicated", "tool_tokens")
    REPLY_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTING_FIELD_NUMBER: _ClassVar[int]
    COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_COMPACTION_SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    TOOL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    reply: _event_pb2.Event
    accounting: ContextAccounting
    compactions: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    background_compaction_scheduled: bool
    deduplicated: bool
    tool_tokens: _containers.RepeatedCompositeFieldContainer[_tool_context_pb2.ToolToken]
    def __init__(self, reply: _Optional[_Union[_event_pb2.Event, _Mapping]] = ..., accounting: _Optional[_Union[ContextAccounting, _Mapping]] = ..., compactions: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ..., background_compaction_scheduled: _Optional[bool] = ..., deduplicated: _Optional[bool] = ..., tool_tokens: _Optional[_Iterable[_Union[_tool_context_pb2.ToolToken, _Mapping]]] = ...) -> None: ...

class StreamGenerateRequest(_message.Message):
    __slots__ = ("turn",)
    TURN_FIELD_NUMBER: _ClassVar[int]
    turn: GenerateRequest
    def __init__(self, turn: _Optional[_Union[GenerateRequest, _Mapping]] = ...) -> None: ...

class StreamGenerateResponse(_message.Message):
    __slots__ = ("chunk", "result")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    chunk: _event_pb2.Event
    result: GenerateResponse
    def __init__(self, chunk: _Optional[_Union[_event_pb2.Event, _Mapping]] = ..., result: _Optional[_Union[GenerateResponse, _Mapping]] = ...) -> None: ...

class GetContextLifecycleRequest(_message.Message):
    __slots__ = ("session", "model")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    session: str
    model: str
    def __init__(self, session: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class ContextLifecycle(_message.Message):
    __slots__ = ("session", "model", "event_count", "compaction_count", "visible_event_count", "visible_tokens", "latest_checkpoint_id", "latest_compaction_event_id", "latest_trigger", "latest_source_fingerprint", "pending_compaction_jobs", "scope_fingerprint", "cache_entry_count", "cache_inflight_count", "cache_waiter_count", "cache_service_reachable", "latest_cache")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LATEST_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    LATEST_COMPACTION_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    LATEST_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    LATEST_SOURCE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PENDING_COMPACTION_JOBS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CACHE_ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    CACHE_INFLIGHT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CACHE_WAITER_COUNT_FIELD_NUMBER: _ClassVar[int]
    CACHE_SERVICE_REACHABLE_FIELD_NUMBER: _ClassVar[int]
    LATEST_CACHE_FIELD_NUMBER: _ClassVar[int]
    session: str
    model: str
    event_count: int
    compaction_count: int
    visible_event_count: int
    visible_tokens: int
    latest_checkpoint_id: str
    latest_compaction_event_id: str
    latest_trigger: _event_pb2.CompactionTrigger
    latest_source_fingerprint: str
    pending_compaction_jobs: int
    scope_fingerprint: str
    cache_entry_count: int
    cache_inflight_count: int
    cache_waiter_count: int
    cache_service_reachable: bool
    latest_cache: _cache_pb2.CacheMetadata
    def __init__(self, session: _Optional[str] = ..., model: _Optional[str] = ..., event_count: _Optional[int] = ..., compaction_count: _Optional[int] = ..., visible_event_count: _Optional[int] = ..., visible_tokens: _Optional[int] = ..., latest_checkpoint_id: _Optional[str] = ..., latest_compaction_event_id: _Optional[str] = ..., latest_trigger: _Optional[_Union[_event_pb2.CompactionTrigger, str]] = ..., latest_source_fingerprint: _Optional[str] = ..., pending_compaction_jobs: _Optional[int] = ..., scope_fingerprint: _Optional[str] = ..., cache_entry_count: _Optional[int] = ..., cache_inflight_count: _Optional[int] = ..., cache_waiter_count: _Optional[int] = ..., cache_service_reachable: _Optional[bool] = ..., latest_cache: _Optional[_Union[_cache_pb2.CacheMetadata, _Mapping]] = ...) -> None: ...

class InvalidationConfirmation(_message.Message):
    __slots__ = ("app", "user", "session", "model", "scope_fingerprint")
    APP_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    app: str
    user: str
    session: str
    model: str
    scope_fingerprint: str
    def __init__(self, app: _Optional[str] = ..., user: _Optional[str] = ..., session: _Optional[str] = ..., model: _Optional[str] = ..., scope_fingerprint: _Optional[str] = ...) -> None: ...

class InvalidateContextCacheRequest(_message.Message):
    __slots__ = ("session", "model", "confirmation")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATION_FIELD_NUMBER: _ClassVar[int]
    session: str
    model: str
    confirmation: InvalidationConfirmation
    def __init__(self, session: _Optional[str] = ..., model: _Optional[str] = ..., confirmation: _Optional[_Union[InvalidationConfirmation, _Mapping]] = ...) -> None: ...

class InvalidateContextCacheResponse(_message.Message):
    __slots__ = ("entries_removed", "inflight_cancelled", "scope_fingerprint")
    ENTRIES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    entries_removed: int
    inflight_cancelled: int
    scope_fingerprint: str
    def __init__(self, entries_removed: _Optional[int] = ..., inflight_cancelled: _Optional[int] = ..., scope_fingerprint: _Optional[str] = ...) -> None: ...
