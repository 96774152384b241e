"""ContextClient: the context service's calls with Python types in and out."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc
from google.protobuf import field_mask_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, policy_pb2, session_pb2, tool_context_pb2
from agentctx.memory.v1 import memory_service_pb2 as mpb
from agentctx.memory.v1 import memory_service_pb2_grpc
from agentctx.type.v1 import content_pb2, event_pb2, generation_pb2
from agentctx_client._artifacts import ArtifactCalls, AttachmentLike, attachment_refs
from agentctx_client._config import DEFAULT_MAX_MESSAGE_BYTES, RetryPolicy, TlsConfig, open_channel
from agentctx_client._errors import InternalError, error_from_rpc
from agentctx_client._retry import Deadline, Retrier
from agentctx_client._tool_context import ToolContext
from agentctx_client._types import (
    JSON,
    AppendResult,
    BuiltContext,
    CacheInvalidation,
    CompactResult,
    Content,
    ContextLifecycle,
    Event,
    GenerateResult,
    InputLike,
    InvalidationConfirmation,
    MemoryAdded,
    MemoryEntry,
    MemoryMatch,
    MemoryRetrieval,
    MemorySearch,
    Page,
    Session,
    ToolLike,
    ToolToken,
    _dict,
    _struct,
    _time,
    _timestamp,
    content_proto,
    input_events,
    new_id,
    tools_proto,
)

Metadata = Sequence[tuple[str, str]]


def connect(
    target: str,
    *,
    tls: TlsConfig | None = None,
    insecure_loopback: bool = False,
    timeout: float | None = 30.0,
    retry: RetryPolicy = RetryPolicy(),
    metadata: Metadata = (),
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    options: Sequence[tuple[str, Any]] = (),
) -> ContextClient:
    """A client for the context service at ``target`` ("host:port").

    TLS is required (``tls=TlsConfig(...)``); plaintext only with
    ``insecure_loopback=True`` to a loopback address, for local
    development. ``timeout`` is each call's overall deadline in seconds,
    retries included (None: no deadline); every method takes its own
    ``timeout`` too. ``metadata`` is sent with every call (for example
    ``[("authorization", "Bearer ...")]``). ``options`` are extra gRPC
    channel options. Use the client as an async context manager, or call
    ``close()``.
    """
    channel = open_channel(target, tls=tls, insecure_loopback=insecure_loopback, max_message_bytes=max_message_bytes,
                           options=options)
    return ContextClient(channel, timeout=timeout, retry=retry, metadata=metadata)


def session_name(app: str, user: str, session: str) -> str:
    """"apps/{app}/users/{user}/sessions/{session}"."""
    return f"apps/{app}/users/{user}/sessions/{session}"


class ContextClient(ArtifactCalls):
    """The context service's calls. Build it with ``connect()``.

    Sessions are named "apps/{app}/users/{user}/sessions/{session}"
    (``Session.name``); methods taking ``session`` want that name. ``stub``
    is the raw ContextServiceStub for anything not wrapped here, and
    ``memory_stub`` the raw MemoryServiceStub. Artifact methods
    (``save_artifact`` and friends) call the ArtifactService of the same
    server (``artifact_stub``).
    """

    def __init__(self, channel: grpc.aio.Channel, *, timeout: float | None = 30.0,
                 retry: RetryPolicy = RetryPolicy(), metadata: Metadata = ()) -> None:
        self.channel = channel
        self.stub = context_service_pb2_grpc.ContextServiceStub(channel)
        self.memory_stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        self.timeout = timeout
        self.retry = retry
        self.metadata = tuple(metadata)
        self._retrier = Retrier(retry)

    async def __aenter__(self) -> ContextClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    # --- sessions

    async def create_session(
        self, app: str, user: str, *, session_id: str = "", state: JSON | None = None, model: str = "",
        config: policy_pb2.ContextConfig | None = None, app_state: JSON | None = None,
        user_state: JSON | None = None, memory_retrieval: MemoryRetrieval | None = None,
        timeout: float | None = None,
    ) -> Session:
        """A new session of ``user`` in ``app``; ``model`` sets
        ``config.model``, ``memory_retrieval`` ``config.retrieval`` (its
        turns retrieve memory themselves). ``app_state``/``user_state`` are merged by key into
        the state the app's (the user's) sessions share. Not retried: a
        retry could meet its own first attempt as ALREADY_EXISTS."""
        cfg = policy_pb2.ContextConfig()
        if config is not None:
            cfg.CopyFrom(config)
        if model:
            cfg.model = model
        if memory_retrieval is not None:
            cfg.retrieval.CopyFrom(memory_retrieval.to_proto())
        request = pb.CreateSessionRequest(
            parent=f"apps/{app}/users/{user}", session_id=session_id,
            session=session_pb2.Session(state=_struct(state), config=cfg, app_state=_struct(app_state),
                                        user_state=_struct(user_state)),
        )
        return Session.from_proto(await self._call(self.stub.CreateSession, request, timeout, retry=False))

    async def get_session(self, session: str, *, timeout: float | None = None) -> Session:
        request = pb.GetSessionRequest(name=session)
        return Session.from_proto(await self._call(self.stub.GetSession, request, timeout))

    async def list_sessions(self, app: str, user: str = "-", *, page_size: int = 0, page_token: str = "",
                            order_by: str = "", timeout: float | None = None) -> Page[Session]:
        """One page of sessions, oldest first (``order_by="update_time"``:
        least recently updated first); ``user="-"`` lists every user of the app."""
        request = pb.ListSessionsRequest(parent=f"apps/{app}/users/{user}", page_size=page_size, page_token=page_token,
                                         order_by=order_by)
        response = await self._call(self.stub.ListSessions, request, timeout)
        return Page(tuple(Session.from_proto(s) for s in response.sessions), response.next_page_token)

    async def iter_sessions(self, app: str, user: str = "-", *, page_size: int = 0,
                            order_by: str = "") -> AsyncIterator[Session]:
        """Every session, page by page."""
        token = ""
        while True:
            page = await self.list_sessions(app, user, page_size=page_size, page_token=token, order_by=order_by)
            for item in page.items:
                yield item
            token = page.next_page_token
            if not token:
                return

    async def update_session(
        self, session: str, *, state: JSON | None = None, config: policy_pb2.ContextConfig | None = None,
        update_mask: Sequence[str] | None = None, etag: str = "", timeout: float | None = None,
    ) -> Session:
        """Replaces ``state`` and/or ``config`` (the mask defaults to the
        ones given; name sub-fields such as "config.selection" in
        ``update_mask``). With ``etag`` the update is conditional: a
        ConflictError carries ``current_etag``."""
        paths = list(update_mask) if update_mask is not None else [
            name for name, value in (("state", state), ("config", config)) if value is not None
        ]
        request = pb.UpdateSessionRequest(
            session=session_pb2.Session(name=session, state=_struct(state), config=config, etag=etag),
            update_mask=field_mask_pb2.FieldMask(paths=paths),
        )
        return Session.from_proto(await self._call(self.stub.UpdateSession, request, timeout, retry=False))

    async def delete_session(self, session: str, *, etag: str = "", timeout: float | None = None) -> None:
        await self._call(self.stub.DeleteSession, pb.DeleteSessionRequest(name=session, etag=etag), timeout,
                         retry=False)

    async def get_shared_state(self, app: str, user: str, *,
                               timeout: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """(app_state, user_state): what the app's sessions share, and what
        the user's sessions in the app share."""
        response = await self._call(self.stub.GetSharedState,
                                    pb.GetSharedStateRequest(parent=f"apps/{app}/users/{user}"), timeout)
        return _dict(response.app_state), _dict(response.user_state)

    # --- events

    async def append_event(self, session: str, event: Event | Content | str | event_pb2.Event, *,
                           expected_etag: str = "", state_delta: JSON | None = None,
                           user_state_delta: JSON | None = None, app_state_delta: JSON | None = None,
                           timeout: float | None = None) -> AppendResult:
        """Appends one event (a str or Content becomes a user event). It gets
        an id when it has none, so a retry stores it once. The deltas are
        merged by key into the session's, the user's and the app's state in
        the event's transaction (a retry of a stored id applies nothing)."""
        (proto,) = input_events(event, invocation_id="")
        delta = None
        if state_delta is not None or user_state_delta is not None or app_state_delta is not None:
            delta = session_pb2.StateDelta(session=_struct(state_delta), user=_struct(user_state_delta),
                                           app=_struct(app_state_delta))
        request = pb.AppendEventRequest(parent=session, event=proto, expected_etag=expected_etag, state_delta=delta)
        response = await self._call(self.stub.AppendEvent, request, timeout)
        return AppendResult(
            Event.from_proto(response.event), response.session_etag, response.deduplicated,
            _time(response.session_update_time, response.HasField("session_update_time")),
        )

    async def append_events(self, session: str, events: Sequence[Event | Content | str | event_pb2.Event], *,
                            timeout: float | None = None) -> tuple[tuple[Event, ...], str]:
        """Appends ``events`` in one transaction, all or nothing (a str or
        Content becomes a user event). Each gets an id when it has none, so a
        retry stores each once. Returns the stored events and the session's
        etag."""
        protos = input_events(list(events), invocation_id="")
        request = pb.BatchAppendEventsRequest(parent=session, events=protos)
        response = await self._call(self.stub.BatchAppendEvents, request, timeout)
        return tuple(Event.from_proto(e) for e in response.events), response.session_etag

    async def list_events(
        self, session: str, *, page_size: int = 0, page_token: str = "", include_compactions: bool = False,
        after_sequence: int = 0, after_time: datetime.datetime | None = None, most_recent: int = 0,
        timeout: float | None = None,
    ) -> Page[Event]:
        """One page of events in sequence order: those after
        ``after_sequence``, created at or after ``after_time``, and of those
        only the ``most_recent`` newest when it is positive."""
        request = pb.ListEventsRequest(parent=session, page_size=page_size, page_token=page_token,
                                       include_compactions=include_compactions, after_sequence=after_sequence,
                                       after_time=_timestamp(after_time), most_recent=most_recent)
        response = await self._call(self.stub.ListEvents, request, timeout)
        return Page(tuple(Event.from_proto(e) for e in response.events), response.next_page_token)

    async def iter_events(self, session: str, *, page_size: int = 0, include_compactions: bool = False,
                          after_sequence: int = 0, after_time: datetime.datetime | None = None,
                          most_recent: int = 0) -> AsyncIterator[Event]:
        """Every event passing the filters of ``list_events``, page by page."""
        token = ""
        while True:
            page = await self.list_events(session, page_size=page_size, page_token=token,
                                          include_compactions=include_compactions, after_sequence=after_sequence,
                                          after_time=after_time, most_recent=most_recent)
            for item in page.items:
                yield item
            token = page.next_page_token
            if not token:
                return

    # --- context

    async def build_context(
        self, session: str, input: Sequence[str | Content] = (), *, system_instruction: str | Content | None = None,
        tools: Sequence[ToolLike] = (), tool_config: generation_pb2.ToolConfig | None = None,
        generation_config: generation_pb2.GenerationConfig | None = None, memory: Sequence[str | Content] = (),
        policy: policy_pb2.SelectionPolicy | None = None, model: str = "", timeout: float | None = None,
        attachments: Sequence[AttachmentLike] = (),
    ) -> BuiltContext:
        """The bounded, secret-pruned request for one model call (read-only).
        ``attachments``: artifacts of the session (or its user's "user:"
        ones) to include right before the input: ids (latest version),
        ``ArtifactRef``s or saved ``ArtifactVersion``s."""
        request = pb.BuildContextRequest(
            session=session, input=[_content(c) for c in input], system_instruction=content_proto(system_instruction),
            tools=tools_proto(tools), tool_config=tool_config, generation_config=generation_config,
            memory=[_content(c) for c in memory], policy=policy, model=model, attachments=attachment_refs(attachments),
        )
        return BuiltContext.from_proto(await self._call(self.stub.BuildContext, request, timeout))

    async def compact_session(self, session: str, *, instructions: str = "",
                              policy: policy_pb2.CompactionPolicy | None = None,
                              timeout: float | None = None) -> CompactResult:
        request = pb.CompactSessionRequest(session=session, instructions=instructions, policy=policy)
        return CompactResult.from_proto(await self._call(self.stub.CompactSession, request, timeout, retry=False))

    # --- turns

    def turn_request(
        self, session: str, input: InputLike | Sequence[InputLike], *, invocation_id: str = "",
        reply_event_id: str = "", system_instruction: str | Content | None = None, tools: Sequence[ToolLike] = (),
        tool_config: generation_pb2.ToolConfig | None = None,
        generation_config: generation_pb2.GenerationConfig | None = None, memory: Sequence[str | Content] = (),
        policy: policy_pb2.SelectionPolicy | None = None, model: str = "", agent: str = "",
        storage: pb.TurnStorage = pb.TURN_STORAGE_UNSPECIFIED, attachments: Sequence[AttachmentLike] = (),
    ) -> pb.GenerateRequest:
        """The GenerateRequest for a turn, every id assigned: pass it to
        ``generate``/``stream_generate`` again to retry the turn yourself."""
        invocation_id = invocation_id or new_id("inv")
        return pb.GenerateRequest(
            session=session, input=input_events(input, invocation_id), invocation_id=invocation_id,
            reply_event_id=reply_event_id or new_id("reply"), system_instruction=content_proto(system_instruction),
            tools=tools_proto(tools), tool_config=tool_config, generation_config=generation_config,
            memory=[_content(c) for c in memory], policy=policy, model=model, agent=agent, storage=storage,
            attachments=attachment_refs(attachments),
        )

    async def generate(
        self, session: str | pb.GenerateRequest, input: InputLike | Sequence[InputLike] = (), *,
        invocation_id: str = "", reply_event_id: str = "", system_instruction: str | Content | None = None,
        tools: Sequence[ToolLike] = (), tool_config: generation_pb2.ToolConfig | None = None,
        generation_config: generation_pb2.GenerationConfig | None = None, memory: Sequence[str | Content] = (),
        policy: policy_pb2.SelectionPolicy | None = None, model: str = "", agent: str = "",
        storage: pb.TurnStorage = pb.TURN_STORAGE_UNSPECIFIED, timeout: float | None = None,
        attachments: Sequence[AttachmentLike] = (),
    ) -> GenerateResult:
        """Runs one turn: ``input`` (text, Content, Events or tool results)
        is stored, the model answers, the reply is stored and returned.
        Retried with the same ids on UNAVAILABLE within the RetryPolicy.
        ``session`` may also be a request from ``turn_request``. With
        ``storage=TURN_STORAGE_NONE`` nothing is stored: the caller appends
        its events itself (as an ADK Runner does). ``attachments``: as
        ``build_context``'s, sent with this turn only, never stored."""
        request = session if isinstance(session, pb.GenerateRequest) else self.turn_request(
            session, input, invocation_id=invocation_id, reply_event_id=reply_event_id,
            system_instruction=system_instruction, tools=tools, tool_config=tool_config,
            generation_config=generation_config, memory=memory, policy=policy, model=model, agent=agent,
            storage=storage, attachments=attachments,
        )
        return GenerateResult.from_proto(await self._call(self.stub.Generate, request, timeout))

    def stream_generate(
        self, session: str | pb.GenerateRequest, input: InputLike | Sequence[InputLike] = (), *,
        invocation_id: str = "", reply_event_id: str = "", system_instruction: str | Content | None = None,
        tools: Sequence[ToolLike] = (), tool_config: generation_pb2.ToolConfig | None = None,
        generation_config: generation_pb2.GenerationConfig | None = None, memory: Sequence[str | Content] = (),
        policy: policy_pb2.SelectionPolicy | None = None, model: str = "", agent: str = "",
        storage: pb.TurnStorage = pb.TURN_STORAGE_UNSPECIFIED, timeout: float | None = None,
        attachments: Sequence[AttachmentLike] = (),
    ) -> GenerateStream:
        """Like ``generate``, streaming the reply: iterate the chunks, then
        read ``stream.result``. Retried like ``generate`` until the first
        message arrives; a failure after that is raised (retry the whole
        turn with ``stream.request``, which holds its ids)."""
        request = session if isinstance(session, pb.GenerateRequest) else self.turn_request(
            session, input, invocation_id=invocation_id, reply_event_id=reply_event_id,
            system_instruction=system_instruction, tools=tools, tool_config=tool_config,
            generation_config=generation_config, memory=memory, policy=policy, model=model, agent=agent,
            storage=storage, attachments=attachments,
        )
        return GenerateStream(self, request, Deadline(self.timeout if timeout is None else timeout))

    # --- tool tokens

    async def mint_tool_tokens(self, session: str, event_id: str, *,
                               timeout: float | None = None) -> list[ToolToken]:
        """Tokens for the function calls of the stored event ``event_id``
        that have no response yet, one per call, for an agent that appends
        its model events itself (``generate`` returns them in
        ``tool_tokens``). Minting again gives new tokens (each stages its
        own writes); every token of a call is collected and revoked with
        the call's response."""
        request = tool_context_pb2.MintToolTokensRequest(session=session, event_id=event_id)
        response = await self._call(self.stub.MintToolTokens, request, timeout)
        return [ToolToken.from_proto(t) for t in response.tokens]

    def tool_context(self, token: str | ToolToken) -> ToolContext:
        """A ToolContext for ``token`` on this client's channel (for a tool
        running in the agent's process; the token is still its only
        credential). Closing it leaves the channel open."""
        return ToolContext(token, self.channel, timeout=self.timeout, retry=self.retry)

    # --- diagnostics

    async def get_context_lifecycle(self, session: str, *, model: str = "",
                                    timeout: float | None = None) -> ContextLifecycle:
        """The session's content-free lifecycle view and the cache scope of
        ``model`` (default: the session's model)."""
        request = pb.GetContextLifecycleRequest(session=session, model=model)
        return ContextLifecycle.from_proto(await self._call(self.stub.GetContextLifecycle, request, timeout))

    async def invalidate_context_cache(self, session: str, *, confirmation: InvalidationConfirmation,
                                       model: str = "", timeout: float | None = None) -> CacheInvalidation:
        """Drops every provider cache of the session's cache scope (every
        session of its app, user and model). ``confirmation`` must repeat
        them and the current scope fingerprint (from
        ``get_context_lifecycle(...).confirmation()``), or the call fails
        with FailedPreconditionError (INVALIDATION_CONFIRMATION_MISMATCH) and
        nothing changes. Not retried: a retry would report what is left."""
        request = pb.InvalidateContextCacheRequest(session=session, model=model, confirmation=confirmation.to_proto())
        return CacheInvalidation.from_proto(
            await self._call(self.stub.InvalidateContextCache, request, timeout, retry=False))

    # --- memory

    async def add_session_to_memory(self, session: str, *, timeout: float | None = None) -> MemoryAdded:
        """Adds the session's user and model text to its user's memory, one
        entry per event (ADK's add_session_to_memory). Idempotent per event,
        so it is retried; call it again after more events to add theirs."""
        request = mpb.AddSessionToMemoryRequest(session=session)
        response = await self._call(self.memory_stub.AddSessionToMemory, request, timeout)
        return MemoryAdded(response.added_count, response.existing_count)

    async def add_memory(self, app: str, user: str, text: str, *, metadata: Mapping[str, str] | None = None,
                         session: str = "", event_id: str = "", author: str = "", memory_id: str = "",
                         timeout: float | None = None) -> MemoryEntry:
        """Adds one entry to the user's memory. It gets an id when it has
        none, so a retry stores it once; the same id with another entry
        raises AlreadyExistsError (MEMORY_ALREADY_EXISTS)."""
        request = mpb.AddMemoryRequest(
            parent=f"apps/{app}/users/{user}", memory_id=memory_id or new_id("mem"),
            memory=mpb.MemoryEntry(text=text, metadata=dict(metadata or {}), session=session, event_id=event_id,
                                   author=author),
        )
        return MemoryEntry.from_proto(await self._call(self.memory_stub.AddMemory, request, timeout))

    async def search_memory(self, app: str, user: str, query: str, *, metadata_filter: Mapping[str, str] | None = None,
                            limit: int = 0, timeout: float | None = None) -> list[MemoryMatch]:
        """The user's entries matching any word of ``query`` (and each
        ``metadata_filter`` pair), best first; ``limit`` 0: the server's
        default (10), at most 100."""
        return (await self.search_memory_ranked(app, user, query, metadata_filter=metadata_filter, limit=limit,
                                                timeout=timeout)).matches

    async def search_memory_ranked(self, app: str, user: str, query: str, *,
                                   metadata_filter: Mapping[str, str] | None = None, limit: int = 0,
                                   timeout: float | None = None) -> MemorySearch:
        """As ``search_memory``, with how the matches were ranked
        ("LEXICAL", or "FUSED" when the server runs semantic memory) and
        whether semantic ranking was unavailable for this search."""
        request = mpb.SearchMemoryRequest(parent=f"apps/{app}/users/{user}", query=query,
                                          metadata_filter=dict(metadata_filter or {}), limit=limit)
        return MemorySearch.from_proto(await self._call(self.memory_stub.SearchMemory, request, timeout))

    async def set_memory_retrieval(self, session: str, retrieval: MemoryRetrieval | None, *,
                                   timeout: float | None = None) -> Session:
        """Sets the session's memory retrieval policy (None: turns it off,
        whatever the server's defaults say), leaving the rest of its config
        as it is."""
        config = policy_pb2.ContextConfig()
        if retrieval is not None:
            config.retrieval.CopyFrom(retrieval.to_proto())
        else:
            config.retrieval.SetInParent()  # present with enabled = false: off
        return await self.update_session(session, config=config, update_mask=["config.retrieval"], timeout=timeout)

    async def delete_memory(self, name: str, *, timeout: float | None = None) -> None:
        """Deletes the entry "apps/{app}/users/{user}/memories/{id}"
        (``MemoryEntry.name``). Not retried: a retry would meet its own
        first attempt as NotFoundError."""
        await self._call(self.memory_stub.DeleteMemory, mpb.DeleteMemoryRequest(name=name), timeout, retry=False)


def _content(value: str | Content) -> content_pb2.Content:
    return (Content.user(value) if isinstance(value, str) else value).to_proto()


class GenerateStream:
    """A streamed turn: an async iterator of partial reply chunks (Events,
    not stored). After the last chunk ``result`` holds the stored reply;
    ``final_result()`` drains what is left and returns it."""

    def __init__(self, client: ContextClient, request: pb.GenerateRequest, deadline: Deadline) -> None:
        self._client = client
        self.request = request
        self._deadline = deadline
        self.result: GenerateResult | None = None
        self._started = False

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._started:
            raise RuntimeError("a GenerateStream can be iterated once")
        self._started = True
        return self._chunks()

    async def final_result(self) -> GenerateResult:
        if not self._started:
            async for _ in self:
                pass
        if self.result is None:
            raise RuntimeError("the stream was not read to its end")
        return self.result

    async def _open(self, left: float | None) -> tuple[Any, Any]:
        call = self._client.stub.StreamGenerate(
            pb.StreamGenerateRequest(turn=self.request), timeout=left, metadata=self._client.metadata
        )
        try:
            return call, await call.read()
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None

    async def _chunks(self) -> AsyncIterator[Event]:
        # Retried only here: before the first message, nothing was shown.
        call, item = await self._client._retrier.run(self._open, self._deadline)
        try:
            while item is not grpc.aio.EOF:
                if item.HasField("chunk"):
                    yield Event.from_proto(item.chunk)
                elif item.HasField("result"):
                    self.result = GenerateResult.from_proto(item.result)
                item = await call.read()
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()
        if self.result is None:
            raise InternalError("the stream ended without a result")
