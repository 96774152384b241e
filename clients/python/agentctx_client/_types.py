"""Python shapes of the common messages, converted to and from the protos.

Every value built from a response keeps the message it came from in
``proto`` (left out of equality and repr) for the fields these classes do
not carry.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from agentctx.context.v1 import context_service_pb2, policy_pb2, session_pb2, tool_context_pb2
from agentctx.memory.v1 import memory_service_pb2
from agentctx.type.v1 import cache_pb2, content_pb2, event_pb2, generation_pb2
from agentctx.type.v1.cache_pb2 import CacheBypassReason, CacheState
from agentctx.type.v1.event_pb2 import CompactionTrigger
from agentctx.type.v1.generation_pb2 import FinishReason

T = TypeVar("T")
JSON = Mapping[str, Any]


def new_id(prefix: str = "evt") -> str:
    """A fresh event or reply id (``prefix-`` and 32 hex digits). Give your
    own ids when a turn must survive a restart of the agent itself."""
    return f"{prefix}-{uuid.uuid4().hex}"


def _struct(value: JSON | None) -> struct_pb2.Struct | None:
    if value is None:
        return None
    out = struct_pb2.Struct()
    out.update(dict(value))
    return out


def _dict(value: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(value)


def _time(value: timestamp_pb2.Timestamp, present: bool) -> datetime.datetime | None:
    return value.ToDatetime(tzinfo=datetime.UTC) if present else None


def _timestamp(value: datetime.datetime | None) -> timestamp_pb2.Timestamp | None:
    """A Timestamp of an aware datetime (a naive one is taken as UTC)."""
    if value is None:
        return None
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value if value.tzinfo else value.replace(tzinfo=datetime.UTC))
    return out


@dataclass(frozen=True)
class FunctionCall:
    """A tool call the model asked for; run it and send ``call.result(...)``."""

    name: str
    args: JSON = field(default_factory=dict)
    id: str = ""

    def result(self, response: JSON) -> FunctionResponse:
        """This call's answer, to send as (part of) the next turn's input."""
        return FunctionResponse(id=self.id, name=self.name, response=response)


@dataclass(frozen=True)
class FunctionResponse:
    """The result of a tool call, paired to it by ``id``."""

    id: str
    name: str
    response: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """One piece of a Content: text, a tool call or a tool result.

    Parts read from the server keep their message in ``proto``, so inline
    data, file references and thought signatures go back unchanged when the
    part is sent again.
    """

    text: str | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    thought: bool = False
    proto: content_pb2.Part | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def from_proto(part: content_pb2.Part) -> Part:
        which = part.WhichOneof("data")
        call = response = None
        if which == "function_call":
            fc = part.function_call
            call = FunctionCall(name=fc.name, args=_dict(fc.args), id=fc.id)
        elif which == "function_response":
            fr = part.function_response
            response = FunctionResponse(id=fr.id, name=fr.name, response=_dict(fr.response))
        return Part(
            text=part.text if which == "text" else None, function_call=call, function_response=response,
            thought=part.thought, proto=part,
        )

    def to_proto(self) -> content_pb2.Part:
        out = content_pb2.Part()
        if self.proto is not None:
            out.CopyFrom(self.proto)
        if self.text is not None:
            out.text = self.text
        elif self.function_call is not None:
            fc = self.function_call
            out.function_call.CopyFrom(content_pb2.FunctionCall(id=fc.id, name=fc.name, args=_struct(fc.args)))
        elif self.function_response is not None:
            fr = self.function_response
            out.function_response.CopyFrom(
                content_pb2.FunctionResponse(id=fr.id, name=fr.name, response=_struct(fr.response))
            )
        out.thought = self.thought
        return out


PartLike = str | Part | FunctionCall | FunctionResponse


def _part(value: PartLike) -> Part:
    if isinstance(value, str):
        return Part(text=value)
    if isinstance(value, FunctionCall):
        return Part(function_call=value)
    if isinstance(value, FunctionResponse):
        return Part(function_response=value)
    return value


@dataclass(frozen=True)
class Content:
    """One message: ``role`` ("user" or "model") and its ordered parts."""

    role: str
    parts: tuple[Part, ...]

    @staticmethod
    def user(*parts: PartLike) -> Content:
        """User content: text, tool results or parts, in order."""
        return Content("user", tuple(_part(p) for p in parts))

    @staticmethod
    def model(*parts: PartLike) -> Content:
        return Content("model", tuple(_part(p) for p in parts))

    @property
    def text(self) -> str:
        """The text parts (not reasoning), joined."""
        return "".join(p.text for p in self.parts if p.text is not None and not p.thought)

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return tuple(p.function_call for p in self.parts if p.function_call is not None)

    @staticmethod
    def from_proto(content: content_pb2.Content) -> Content:
        return Content(content.role, tuple(Part.from_proto(p) for p in content.parts))

    def to_proto(self) -> content_pb2.Content:
        return content_pb2.Content(role=self.role, parts=[p.to_proto() for p in self.parts])


@dataclass(frozen=True)
class FunctionDeclaration:
    """A function the model may call; ``parameters`` is a JSON Schema."""

    name: str
    description: str = ""
    parameters: JSON | None = None

    def to_proto(self) -> generation_pb2.FunctionDeclaration:
        return generation_pb2.FunctionDeclaration(
            name=self.name, description=self.description, parameters=_struct(self.parameters)
        )


@dataclass(frozen=True)
class Usage:
    """Token usage of one model call, as the provider reported it."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    output_tokens: int = 0
    thoughts_tokens: int = 0
    total_tokens: int = 0
    # Of prompt_tokens, those written into a provider prefix cache (Anthropic
    # bills them at its write price); 0 where the provider reports none.
    cache_write_tokens: int = 0

    @staticmethod
    def from_proto(usage: generation_pb2.Usage) -> Usage:
        return Usage(usage.prompt_tokens, usage.cached_prompt_tokens, usage.output_tokens,
                     usage.thoughts_tokens, usage.total_tokens, usage.cache_write_tokens)


@dataclass(frozen=True)
class Event:
    """One entry of a session's history.

    To send: ``content`` and optionally ``id`` (the idempotency key; the
    client assigns one when empty), ``author``, ``invocation_id``,
    ``branch``, ``custom_metadata``. ``name``, ``sequence``, ``create_time``,
    ``usage`` and ``is_compaction`` are set by the server. A model reply
    carries ``finish_reason`` (FinishReason, 0 when not reported) and
    ``model_version``. ``retracts_event_id``: a retraction, an event
    without content that takes back the earlier event of that id (it stays
    stored and listed; built contexts and compaction leave both out).
    ``error_code`` and ``error_message``: why the call that produced the
    event failed or was stopped (stored, never sent to a model).
    """

    content: Content | None = None
    id: str = ""
    author: str = "user"
    invocation_id: str = ""
    branch: str = ""
    partial: bool = False
    turn_complete: bool = False
    custom_metadata: JSON | None = None
    long_running_tool_ids: tuple[str, ...] = ()
    name: str = ""
    sequence: int = 0
    create_time: datetime.datetime | None = None
    usage: Usage | None = None
    is_compaction: bool = False
    finish_reason: FinishReason = generation_pb2.FINISH_REASON_UNSPECIFIED
    model_version: str = ""
    retracts_event_id: str = ""
    error_code: str = ""
    error_message: str = ""
    proto: event_pb2.Event | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        return self.content.text if self.content else ""

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return self.content.function_calls if self.content else ()

    @staticmethod
    def from_proto(event: event_pb2.Event) -> Event:
        return Event(
            content=Content.from_proto(event.content) if event.HasField("content") else None,
            id=event.id, author=event.author, invocation_id=event.invocation_id, branch=event.branch,
            partial=event.partial, turn_complete=event.turn_complete,
            custom_metadata=_dict(event.custom_metadata) if event.HasField("custom_metadata") else None,
            long_running_tool_ids=tuple(event.long_running_tool_ids), name=event.name, sequence=event.sequence,
            create_time=_time(event.create_time, event.HasField("create_time")),
            usage=Usage.from_proto(event.usage) if event.HasField("usage") else None,
            is_compaction=event.kind == event_pb2.EVENT_KIND_COMPACTION, finish_reason=event.finish_reason,
            model_version=event.model_version, retracts_event_id=event.retracts_event_id,
            error_code=event.error_code, error_message=event.error_message, proto=event,
        )

    def to_proto(self) -> event_pb2.Event:
        """The event as sent (the server ignores output-only fields)."""
        return event_pb2.Event(
            id=self.id, author=self.author, invocation_id=self.invocation_id, branch=self.branch,
            content=self.content.to_proto() if self.content else None, partial=self.partial,
            turn_complete=self.turn_complete, custom_metadata=_struct(self.custom_metadata),
            long_running_tool_ids=self.long_running_tool_ids, finish_reason=self.finish_reason,
            model_version=self.model_version, retracts_event_id=self.retracts_event_id,
            error_code=self.error_code, error_message=self.error_message,
        )

    @property
    def cache_metadata(self) -> CacheMetadata | None:
        """How the cache served the model call of a stored reply (None on
        other events)."""
        if self.proto is None or not self.proto.HasField("cache_metadata"):
            return None
        return CacheMetadata.from_proto(self.proto.cache_metadata)

    @property
    def compaction_trigger(self) -> CompactionTrigger | None:
        """What started the compaction of a compaction entry (None on other events)."""
        if not self.is_compaction or self.proto is None:
            return None
        return self.proto.compaction.checkpoint.trigger


@dataclass(frozen=True)
class Session:
    """A session. Its context configuration (policies) is ``proto.config``;
    ``app_state`` and ``user_state`` are the states its app's (its user's)
    sessions share."""

    name: str
    state: JSON
    etag: str
    model: str
    event_count: int
    last_sequence: int
    create_time: datetime.datetime | None
    update_time: datetime.datetime | None
    proto: session_pb2.Session = field(compare=False, repr=False)
    app_state: JSON = field(default_factory=dict)
    user_state: JSON = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The last segment of ``name``."""
        return self.name.rsplit("/", 1)[-1]

    @staticmethod
    def from_proto(session: session_pb2.Session) -> Session:
        return Session(
            name=session.name, state=_dict(session.state), etag=session.etag, model=session.config.model,
            event_count=session.event_count, last_sequence=session.last_sequence,
            create_time=_time(session.create_time, session.HasField("create_time")),
            update_time=_time(session.update_time, session.HasField("update_time")),
            proto=session, app_state=_dict(session.app_state), user_state=_dict(session.user_state),
        )


@dataclass(frozen=True)
class Accounting:
    """The content-free account of one built context (the common figures;
    ``proto`` has every section's bytes and tokens)."""

    events_seen: int
    events_filtered: int
    events_selected: int
    units_selected: int
    units_dropped: int
    secrets_pruned: int
    request_bytes: int
    request_tokens: int
    history_tokens: int
    bytes_per_token: float
    calibrated: bool
    compressed: bool
    prefix_fingerprint: str
    envelope_fingerprint: str
    proto: context_service_pb2.ContextAccounting = field(compare=False, repr=False)
    attachment_bytes: int = 0
    attachment_tokens: int = 0

    @staticmethod
    def from_proto(a: context_service_pb2.ContextAccounting) -> Accounting:
        return Accounting(
            events_seen=a.events_seen, events_filtered=a.events_filtered, events_selected=a.events_selected,
            units_selected=a.units_selected, units_dropped=a.units_dropped, secrets_pruned=a.secrets_pruned,
            request_bytes=a.request.bytes, request_tokens=a.request.tokens, history_tokens=a.history.tokens,
            bytes_per_token=a.bytes_per_token, calibrated=a.calibrated, compressed=a.compressed,
            prefix_fingerprint=a.prefix_fingerprint, envelope_fingerprint=a.envelope_fingerprint, proto=a,
            attachment_bytes=a.attachments.bytes, attachment_tokens=a.attachments.tokens,
        )


@dataclass(frozen=True)
class AppendResult:
    """The stored event, the session's etag after the append, whether the
    event id was already stored (then nothing changed), and the session's
    update time after the append."""

    event: Event
    session_etag: str
    deduplicated: bool
    session_update_time: datetime.datetime | None = None


@dataclass(frozen=True)
class BuiltContext:
    """BuildContext's result: the request to send to a model, and how it was built."""

    model: str
    system_instruction: Content | None
    contents: tuple[Content, ...]
    accounting: Accounting
    proto: context_service_pb2.BuildContextResponse = field(compare=False, repr=False)

    @staticmethod
    def from_proto(r: context_service_pb2.BuildContextResponse) -> BuiltContext:
        req = r.request
        return BuiltContext(
            model=req.model,
            system_instruction=Content.from_proto(req.system_instruction) if req.HasField("system_instruction") else None,
            contents=tuple(Content.from_proto(c) for c in req.contents),
            accounting=Accounting.from_proto(r.accounting), proto=r,
        )


@dataclass(frozen=True)
class CompactResult:
    """CompactSession's result; ``compaction`` is None when nothing was compacted."""

    compacted: bool
    compaction: Event | None
    kept_events: int
    kept_tokens: int
    kept_over_budget: bool

    @staticmethod
    def from_proto(r: context_service_pb2.CompactSessionResponse) -> CompactResult:
        return CompactResult(
            compacted=r.compacted, compaction=Event.from_proto(r.compaction) if r.HasField("compaction") else None,
            kept_events=r.kept_events, kept_tokens=r.kept_tokens, kept_over_budget=r.kept_over_budget,
        )


@dataclass(frozen=True)
class GenerateResult:
    """One completed turn: the stored reply (run its ``function_calls`` and
    send their results as the next turn's input) and how it was built."""

    reply: Event
    accounting: Accounting
    compactions: tuple[Event, ...]
    background_compaction_scheduled: bool
    deduplicated: bool
    proto: context_service_pb2.GenerateResponse = field(compare=False, repr=False)
    # One per function call of the stored reply (none when the turn stored
    # nothing): give each to the tool that runs the call, and nothing else.
    tool_tokens: tuple[ToolToken, ...] = ()

    def tool_token(self, call: FunctionCall | str) -> ToolToken | None:
        """The token minted for ``call`` (a FunctionCall or its id), or None."""
        call_id = call if isinstance(call, str) else call.id
        return next((t for t in self.tool_tokens if t.function_call_id == call_id), None)

    @property
    def text(self) -> str:
        return self.reply.text

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return self.reply.function_calls

    @property
    def usage(self) -> Usage | None:
        return self.reply.usage

    @staticmethod
    def from_proto(r: context_service_pb2.GenerateResponse) -> GenerateResult:
        return GenerateResult(
            reply=Event.from_proto(r.reply), accounting=Accounting.from_proto(r.accounting),
            compactions=tuple(Event.from_proto(e) for e in r.compactions),
            background_compaction_scheduled=r.background_compaction_scheduled, deduplicated=r.deduplicated,
            proto=r, tool_tokens=tuple(ToolToken.from_proto(t) for t in r.tool_tokens),
        )

    @property
    def cache_metadata(self) -> CacheMetadata | None:
        return self.reply.cache_metadata


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; pass ``next_page_token`` for the next ("" on the last)."""

    items: tuple[T, ...]
    next_page_token: str


InputLike = str | Content | Event | FunctionResponse | event_pb2.Event


def input_events(value: InputLike | Sequence[InputLike], invocation_id: str) -> tuple[event_pb2.Event, ...]:
    """A turn's input as events, each with an id (kept when given, assigned
    otherwise) so that every attempt of the turn sends the same ids. An
    Event message is sent as it is (copied, then given those ids)."""
    single = (str, Content, Event, FunctionResponse, event_pb2.Event)
    items: Sequence[InputLike] = [value] if isinstance(value, single) else value
    out = []
    for item in items:
        if isinstance(item, event_pb2.Event):
            event = event_pb2.Event()
            event.CopyFrom(item)
        elif isinstance(item, Event):
            event = item.to_proto()
        else:
            content = Content.user(item) if isinstance(item, (str, FunctionResponse)) else item
            event = event_pb2.Event(author="user", content=content.to_proto())
        if not event.id:
            event.id = new_id()
        if not event.invocation_id:
            event.invocation_id = invocation_id
        out.append(event)
    return tuple(out)


def content_proto(value: str | Content | None) -> content_pb2.Content | None:
    if value is None:
        return None
    return (Content.user(value) if isinstance(value, str) else value).to_proto()


ToolLike = FunctionDeclaration | generation_pb2.Tool


def tools_proto(tools: Sequence[ToolLike]) -> list[generation_pb2.Tool]:
    """Declarations grouped into one Tool; Tool messages passed through."""
    declarations = [t.to_proto() for t in tools if isinstance(t, FunctionDeclaration)]
    out = [t for t in tools if isinstance(t, generation_pb2.Tool)]
    if declarations:
        out.insert(0, generation_pb2.Tool(function_declarations=declarations))
    return out


@dataclass(frozen=True)
class CacheMetadata:
    """How the provider prefix cache served one model call: ``state``
    (CacheState: CREATED, HIT, GROWN or BYPASS, with ``bypass_reason``),
    the cached prefix's tokens and fingerprint, its scope and uses."""

    state: CacheState
    bypass_reason: CacheBypassReason
    prefix_fingerprint: str
    prefix_tokens: int
    expire_time: datetime.datetime | None
    scope_fingerprint: str
    uses: int
    proto: cache_pb2.CacheMetadata = field(compare=False, repr=False)

    @staticmethod
    def from_proto(m: cache_pb2.CacheMetadata) -> CacheMetadata:
        return CacheMetadata(
            state=m.state, bypass_reason=m.bypass_reason, prefix_fingerprint=m.prefix_fingerprint,
            prefix_tokens=m.prefix_tokens, expire_time=_time(m.expire_time, m.HasField("expire_time")),
            scope_fingerprint=m.scope_fingerprint, uses=m.uses, proto=m,
        )


@dataclass(frozen=True)
class InvalidationConfirmation:
    """What ``invalidate_context_cache`` is to drop, repeated exactly: the
    session's app, user and id, the model and the current scope fingerprint
    (``ContextLifecycle.confirmation()`` builds it)."""

    app: str
    user: str
    session: str
    model: str
    scope_fingerprint: str

    @staticmethod
    def from_proto(c: context_service_pb2.InvalidationConfirmation) -> InvalidationConfirmation:
        return InvalidationConfirmation(c.app, c.user, c.session, c.model, c.scope_fingerprint)

    def to_proto(self) -> context_service_pb2.InvalidationConfirmation:
        return context_service_pb2.InvalidationConfirmation(
            app=self.app, user=self.user, session=self.session, model=self.model,
            scope_fingerprint=self.scope_fingerprint,
        )


@dataclass(frozen=True)
class ContextLifecycle:
    """The content-free diagnostic view of one session (GetContextLifecycle):
    counts, the latest compaction, and the cache scope of ``model``. The
    cache counts are 0 when ``cache_service_reachable`` is False."""

    session: str
    model: str
    event_count: int
    compaction_count: int
    visible_event_count: int
    visible_tokens: int
    latest_checkpoint_id: str
    latest_compaction_event_id: str
    latest_trigger: CompactionTrigger
    latest_source_fingerprint: str
    pending_compaction_jobs: int
    scope_fingerprint: str
    cache_entry_count: int
    cache_inflight_count: int
    cache_waiter_count: int
    cache_service_reachable: bool
    latest_cache: CacheMetadata | None
    proto: context_service_pb2.ContextLifecycle = field(compare=False, repr=False)

    @staticmethod
    def from_proto(v: context_service_pb2.ContextLifecycle) -> ContextLifecycle:
        return ContextLifecycle(
            session=v.session, model=v.model, event_count=v.event_count, compaction_count=v.compaction_count,
            visible_event_count=v.visible_event_count, visible_tokens=v.visible_tokens,
            latest_checkpoint_id=v.latest_checkpoint_id, latest_compaction_event_id=v.latest_compaction_event_id,
            latest_trigger=v.latest_trigger, latest_source_fingerprint=v.latest_source_fingerprint,
            pending_compaction_jobs=v.pending_compaction_jobs, scope_fingerprint=v.scope_fingerprint,
            cache_entry_count=v.cache_entry_count, cache_inflight_count=v.cache_inflight_count,
            cache_waiter_count=v.cache_waiter_count, cache_service_reachable=v.cache_service_reachable,
            latest_cache=CacheMetadata.from_proto(v.latest_cache) if v.HasField("latest_cache") else None, proto=v,
        )

    def confirmation(self) -> InvalidationConfirmation:
        """The confirmation that invalidates this view's cache scope (valid
        while the scope fingerprint stays the same)."""
        parts = self.session.split("/")
        if len(parts) != 6 or parts[0::2] != ["apps", "users", "sessions"]:
            raise ValueError(f"not a session name: {self.session!r}")
        return InvalidationConfirmation(parts[1], parts[3], parts[5], self.model, self.scope_fingerprint)


@dataclass(frozen=True)
class CacheInvalidation:
    """InvalidateContextCache's result: caches deleted and creations
    cancelled in the scope with ``scope_fingerprint``."""

    entries_removed: int
    inflight_cancelled: int
    scope_fingerprint: str
    proto: context_service_pb2.InvalidateContextCacheResponse = field(compare=False, repr=False)

    @staticmethod
    def from_proto(r: context_service_pb2.InvalidateContextCacheResponse) -> CacheInvalidation:
        return CacheInvalidation(r.entries_removed, r.inflight_cancelled, r.scope_fingerprint, proto=r)


@dataclass(frozen=True)
class MemoryEntry:
    """A memory entry: its text, metadata and source (``session`` name and
    ``event_id``, empty for entries added without one)."""

    name: str
    text: str
    metadata: Mapping[str, str]
    session: str
    event_id: str
    author: str
    create_time: datetime.datetime | None
    proto: memory_service_pb2.MemoryEntry = field(compare=False, repr=False)

    @property
    def id(self) -> str:
        """The last segment of ``name``."""
        return self.name.rsplit("/", 1)[-1]

    @staticmethod
    def from_proto(entry: memory_service_pb2.MemoryEntry) -> MemoryEntry:
        return MemoryEntry(
            name=entry.name, text=entry.text, metadata=dict(entry.metadata), session=entry.session,
            event_id=entry.event_id, author=entry.author,
            create_time=_time(entry.create_time, entry.HasField("create_time")), proto=entry,
        )


@dataclass(frozen=True)
class MemoryMatch:
    """A search result: the entry and its score (higher is better;
    comparable within one search only). ``lexical_rank``/``vector_rank``:
    its 1-based rank in each ranking that found it (0: not found by it);
    ``vector_score``: the cosine, when ranked by vector."""

    memory: MemoryEntry
    score: float
    lexical_rank: int = 0
    vector_rank: int = 0
    vector_score: float = 0.0

    @staticmethod
    def from_proto(match: memory_service_pb2.MemoryMatch) -> MemoryMatch:
        return MemoryMatch(MemoryEntry.from_proto(match.memory), match.score, match.lexical_rank,
                           match.vector_rank, match.vector_score)


@dataclass(frozen=True)
class MemorySearch:
    """A search's matches, best first; ``ranking``: "LEXICAL" or "FUSED"
    (lexical and vector ranks fused); ``semantic_unavailable``: semantic
    ranking is configured but the query could not be embedded, so the
    matches are lexical only."""

    matches: list[MemoryMatch]
    ranking: str
    semantic_unavailable: bool

    @staticmethod
    def from_proto(response: memory_service_pb2.SearchMemoryResponse) -> MemorySearch:
        ranking = memory_service_pb2.MemoryRanking.Name(response.ranking).removeprefix("MEMORY_RANKING_")
        return MemorySearch([MemoryMatch.from_proto(m) for m in response.matches], ranking,
                            response.semantic_unavailable)


@dataclass(frozen=True)
class MemoryRetrieval:
    """A session's memory retrieval policy: BuildContext and Generate search
    the user's memory with the newest user text and put at most ``limit``
    matches (server default 5) scoring at least ``min_score`` in the
    request's memory section."""

    limit: int | None = None
    min_score: float | None = None

    def to_proto(self) -> policy_pb2.MemoryRetrievalPolicy:
        out = policy_pb2.MemoryRetrievalPolicy(enabled=True)
        if self.limit is not None:
            out.limit = self.limit
        if self.min_score is not None:
            out.min_score = self.min_score
        return out


@dataclass(frozen=True)
class MemoryAdded:
    """What add_session_to_memory did: entries added, and events with text
    already in memory."""

    added: int
    existing: int


@dataclass(frozen=True)
class ToolToken:
    """The tool token minted for one function call (GenerateResult's
    ``tool_tokens``, ``ContextClient.mint_tool_tokens``): hand ``token`` to
    the tool that runs the call, which builds a ``ToolContext`` from it. Its
    repr never shows the token; never log or store it."""

    function_call_id: str
    tool: str
    token: str = field(repr=False)
    capabilities: tuple[str, ...]
    expire_time: datetime.datetime | None
    proto: tool_context_pb2.ToolToken = field(compare=False, repr=False)

    @staticmethod
    def from_proto(t: tool_context_pb2.ToolToken) -> ToolToken:
        return ToolToken(
            function_call_id=t.function_call_id, tool=t.tool, token=t.token, capabilities=tuple(t.capabilities),
            expire_time=_time(t.expire_time, t.HasField("expire_time")), proto=t,
        )


@dataclass(frozen=True)
class ToolIdentity:
    """What a tool token names: the app, user and session (its name), the
    event holding the function call, the call's id, the tool, the token's
    capabilities ("identity" first) and its deadline."""

    app: str
    user: str
    session: str
    event_id: str
    function_call_id: str
    tool: str
    capabilities: tuple[str, ...]
    expire_time: datetime.datetime | None
    proto: tool_context_pb2.ToolIdentity = field(compare=False, repr=False)

    @staticmethod
    def from_proto(i: tool_context_pb2.ToolIdentity) -> ToolIdentity:
        return ToolIdentity(
            app=i.app, user=i.user, session=i.session, event_id=i.event_id, function_call_id=i.function_call_id,
            tool=i.tool, capabilities=tuple(i.capabilities),
            expire_time=_time(i.expire_time, i.HasField("expire_time")), proto=i,
        )


@dataclass(frozen=True)
class ToolState:
    """The state a tool call reads: its session's (``state``), its user's
    and its app's, each with the call's own staged delta merged in."""

    state: JSON
    user_state: JSON
    app_state: JSON
    proto: tool_context_pb2.ToolState = field(compare=False, repr=False)

    @staticmethod
    def from_proto(s: tool_context_pb2.ToolState) -> ToolState:
        return ToolState(state=_dict(s.state), user_state=_dict(s.user_state), app_state=_dict(s.app_state), proto=s)
