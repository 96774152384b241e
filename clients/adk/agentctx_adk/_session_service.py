"""AgentCtxSessionService: ADK's BaseSessionService over the agentctx
context service.

Sessions, events and state live in the context service, so the context
service can build each model request from them (see AgentCtxLlm). ADK's
state scopes map onto agentctx's: ``app:`` keys onto the app's shared state,
``user:`` keys onto the user's, other keys onto the session's; ``temp:`` keys
are never stored. An event and its state delta are written in one
transaction. A session read here carries the session's etag, and appending
to it is conditional on that etag: a session changed since it was read is
StaleSessionError, as with ADK's DatabaseSessionService. The events of
recently used sessions are kept (``_event_cache``), so that reading a
session again fetches only the events stored since.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.session import Session
from typing_extensions import override

import agentctx_client
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2
from agentctx_adk import _convert
from agentctx_adk._event_cache import EventCache

_STALE_MESSAGE = ("The session has been modified in storage since it was loaded. "
                  "Please reload the session before appending more events.")
_PAGE = 1000
# The session a user's model calls run in when they carry their own contents
# (an AgentTool's child agent, ADK's compaction summarizer): it stores
# nothing (every such call is TURN_STORAGE_NONE), so its history stays empty.
SCRATCH_SESSION_ID = "agentctx:scratch"


class AgentCtxSessionService(BaseSessionService):
    """ADK sessions stored by an agentctx context service.

    ``client`` is an ``agentctx_client.ContextClient`` (``connect(...)``);
    it is closed by ``close()`` only when ``owns_client``. ``model`` and
    ``config`` set new sessions' context configuration (model, selection,
    compaction and cache policies). ``app_prefix`` is put before every ADK
    app name to make the agentctx app id ("{app_prefix}{app_name}"), to keep
    several deployments (or test runs) apart in one context service.
    ``cached_sessions`` and ``cached_bytes`` bound the sessions whose
    events are kept between reads and the bytes they hold (0 sessions:
    none, every read lists all events).
    """

    def __init__(self, client: agentctx_client.ContextClient | Callable[[], agentctx_client.ContextClient], *,
                 model: str = "", config: policy_pb2.ContextConfig | None = None, app_prefix: str = "",
                 owns_client: bool = False, cached_sessions: int = 256, cached_bytes: int = 64 << 20) -> None:
        # A callable is called at first use, on the loop that uses the
        # service: a gRPC channel belongs to the loop it was made on.
        self._client = client if isinstance(client, agentctx_client.ContextClient) else None
        self._connect = None if isinstance(client, agentctx_client.ContextClient) else client
        self.model = model
        self.config = config
        self.app_prefix = app_prefix
        self._owns_client = owns_client
        self._cache = EventCache(cached_sessions, cached_bytes)
        self._scratch: set[str] = set()

    @classmethod
    def connect(cls, target: str, *, tls: agentctx_client.TlsConfig | None = None, insecure_loopback: bool = False,
                metadata: Sequence[tuple[str, str]] = (), lazy: bool = False, **kwargs: Any) -> AgentCtxSessionService:
        """A service with its own client for the context service at
        ``target``; with ``lazy`` the client is made at first use, on the
        event loop that uses it (for a service made before that loop runs,
        as ``adk web`` and ``adk api_server`` make theirs)."""
        def make() -> agentctx_client.ContextClient:
            return agentctx_client.connect(target, tls=tls, insecure_loopback=insecure_loopback, metadata=metadata)

        return cls(make if lazy else make(), owns_client=True, **kwargs)

    @property
    def client(self) -> agentctx_client.ContextClient:
        if self._client is None:
            assert self._connect is not None
            self._client = self._connect()
        return self._client

    async def close(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.close()
            if self._connect is not None:
                self._client = None  # a later use connects again

    async def __aenter__(self) -> AgentCtxSessionService:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # --- names

    def _app(self, app_name: str) -> str:
        return self.app_prefix + app_name

    def session_name(self, app_name: str, user_id: str, session_id: str) -> str:
        """The agentctx name of an ADK session."""
        return agentctx_client.session_name(self._app(app_name), user_id, session_id)

    async def scratch_session(self, app_name: str, user_id: str) -> str:
        """The name of the app's and user's scratch session, made (once per
        process) with this service's model and config."""
        name = self.session_name(app_name, user_id, SCRATCH_SESSION_ID)
        if name not in self._scratch:
            try:
                await self.create_session(app_name=app_name, user_id=user_id, session_id=SCRATCH_SESSION_ID)
            except AlreadyExistsError:
                pass
            self._scratch.add(name)
        return name

    # --- sessions

    @override
    async def create_session(self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None,
                             session_id: str | None = None) -> Session:
        session_state, user_state, app_state = _convert.split_state(_json_safe(state))
        config = policy_pb2.ContextConfig()
        if self.config is not None:
            config.CopyFrom(self.config)
        if self.model:
            config.model = self.model
        request = pb.CreateSessionRequest(
            parent=f"apps/{self._app(app_name)}/users/{user_id}", session_id=session_id or "",
            session=session_pb2.Session(state=_convert.to_struct(session_state), config=config,
                                        app_state=_convert.to_struct(app_state),
                                        user_state=_convert.to_struct(user_state)),
        )
        try:
            proto = await self.client._call(self.client.stub.CreateSession, request, None, retry=False)
        except agentctx_client.AlreadyExistsError:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        self._cache.started(proto.name, proto)
        return self._session(app_name, user_id, proto, [])

    @override
    async def get_session(self, *, app_name: str, user_id: str, session_id: str,
                          config: GetSessionConfig | None = None) -> Session | None:
        name = self.session_name(app_name, user_id, session_id)
        try:
            proto = await self.client._call(self.client.stub.GetSession, pb.GetSessionRequest(name=name), None)
        except (agentctx_client.NotFoundError, agentctx_client.InvalidArgumentError):
            return None
        if config is None or (config.num_recent_events is None and config.after_timestamp is None):
            events = await self._all_events(name, proto)
        elif config.num_recent_events == 0 or proto.last_sequence == 0:
            events = []
        else:
            request = pb.ListEventsRequest(parent=name, page_size=_PAGE)
            if config.after_timestamp is not None:
                request.after_time.FromDatetime(
                    datetime.datetime.fromtimestamp(max(config.after_timestamp, 0.0), tz=datetime.UTC))
            if config.num_recent_events:
                request.most_recent = config.num_recent_events
            events = [Event.model_validate_json(j) for _, j in await self._list(request, proto.last_sequence)]
        return self._session(app_name, user_id, proto, events)

    async def _all_events(self, name: str, proto: session_pb2.Session) -> list[Event]:
        """Every event of the session as read (``proto``): the kept ones,
        then those stored since, read from the context service."""
        history = self._cache.valid(name, proto)
        after = history.last_sequence if history else 0
        kept = list(history.events) if history else []
        fresh: list[tuple[int, str]] = []
        if proto.last_sequence > after:
            fresh = await self._list(pb.ListEventsRequest(parent=name, page_size=_PAGE, after_sequence=after),
                                     proto.last_sequence)
        self._cache.extend(name, proto, after, fresh)
        return [Event.model_validate_json(j) for _, j in kept + fresh]

    async def _list(self, request: pb.ListEventsRequest, last_sequence: int) -> list[tuple[int, str]]:
        """(sequence, ADK JSON) of the listed events up to ``last_sequence``:
        events appended after the session was read belong to a later
        revision than its etag and are left out, so the etag holds."""
        out: list[tuple[int, str]] = []
        while True:
            page = await self.client._call(self.client.stub.ListEvents, request, None)
            out += [(e.sequence, _convert.event_json(e)) for e in page.events if e.sequence <= last_sequence]
            if not page.next_page_token or (page.events and page.events[-1].sequence >= last_sequence):
                return out
            request.page_token = page.next_page_token

    @override
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        request = pb.ListSessionsRequest(parent=f"apps/{self._app(app_name)}/users/{user_id or '-'}",
                                         page_size=_PAGE, order_by="update_time")
        sessions = []
        while True:
            page = await self.client._call(self.client.stub.ListSessions, request, None)
            for proto in page.sessions:
                owner = proto.name.split("/")[3]
                sessions.append(self._session(app_name, owner, proto, []))
            if not page.next_page_token:
                return ListSessionsResponse(sessions=sessions)
            request.page_token = page.next_page_token

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        name = self.session_name(app_name, user_id, session_id)
        self._cache.drop(name)
        try:
            await self.client._call(self.client.stub.DeleteSession, pb.DeleteSessionRequest(name=name), None,
                                    retry=False)
        except agentctx_client.NotFoundError:
            pass

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        request = pb.GetSharedStateRequest(parent=f"apps/{self._app(app_name)}/users/{user_id}")
        response = await self.client._call(self.client.stub.GetSharedState, request, None)
        return _convert.from_struct(response.user_state)

    # --- events

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        if not event.id:
            event.id = Event.new_id()
        delta = None
        if event.actions and event.actions.state_delta:
            # Stored as ADK stores it: JSON-safe, so the event reads back equal.
            event.actions.state_delta = _json_safe(event.actions.state_delta)
        _convert.order_event(event)
        if event.actions and event.actions.state_delta:
            session_delta, user_delta, app_delta = _convert.split_state(event.actions.state_delta)
            delta = session_pb2.StateDelta(session=_convert.to_struct(session_delta or None),
                                           user=_convert.to_struct(user_delta or None),
                                           app=_convert.to_struct(app_delta or None))
        name = self.session_name(session.app_name, session.user_id, session.id)
        marker = session._storage_update_marker
        if marker is None:
            marker = await self._revision_of_unread(name, session)
        request = pb.AppendEventRequest(parent=name, event=_convert.event_to_proto(event), expected_etag=marker,
                                        state_delta=delta)
        try:
            response = await self.client._call(self.client.stub.AppendEvent, request, None)
        except agentctx_client.ConflictError:
            raise StaleSessionError(_STALE_MESSAGE) from None
        except agentctx_client.NotFoundError:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        if not response.deduplicated:
            self._cache.appended(name, response.event)
        session._storage_update_marker = response.session_etag
        session.last_update_time = _seconds(response.session_update_time)
        if response.deduplicated and any(e.id == event.id for e in session.events):
            # Stored once already: the session keeps it once too.
            return event
        return self._commit_event_to_session(session, event)

    async def _revision_of_unread(self, name: str, session: Session) -> str:
        """The etag to append to a session this service did not read (built
        by hand, or by another session service), as ADK's
        DatabaseSessionService judges one: stale when storage was updated
        after ``session.last_update_time`` and its newest event is not the
        session's."""
        try:
            proto: session_pb2.Session = await self.client._call(self.client.stub.GetSession,
                                                                 pb.GetSessionRequest(name=name), None)
        except agentctx_client.NotFoundError:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        if _seconds(proto.update_time) > session.last_update_time:
            newest = await self.client._call(self.client.stub.ListEvents, pb.ListEventsRequest(
                parent=name, most_recent=1, page_size=1), None)
            newest_id = newest.events[-1].id if newest.events else None
            if newest_id != (session.events[-1].id if session.events else None):
                raise StaleSessionError(_STALE_MESSAGE)
        return proto.etag

    # --- plumbing

    def _session(self, app_name: str, user_id: str, proto: session_pb2.Session, events: list[Event]) -> Session:
        state = _convert.merge_state(_convert.from_struct(proto.state), _convert.from_struct(proto.user_state),
                                     _convert.from_struct(proto.app_state))
        session = Session(id=proto.name.rsplit("/", 1)[-1], app_name=app_name, user_id=user_id, state=state,
                          events=events, last_update_time=_seconds(proto.update_time))
        session._storage_update_marker = proto.etag
        return session


def _seconds(stamp: Any) -> float:
    return float(stamp.ToDatetime(tzinfo=datetime.UTC).timestamp())


def _json_safe(state: dict[str, Any] | None) -> dict[str, Any]:
    from google.adk.sessions import _session_util

    return _session_util.make_json_safe_state(state or {})
