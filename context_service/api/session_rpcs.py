"""SessionRpcs: sessions and their events.

Each RPC authenticates the caller first, then parses the resource name,
then checks the caller may use the app (so another app's sessions are
PERMISSION_DENIED before anything about them is looked up), validates, and
calls the store. Conversion is in mapping.convert; rules are in
domain.names, domain.event_validation, domain.paging and
domain.update_masks.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import empty_pb2, struct_pb2

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2, session_pb2
from agentctx.type.v1 import event_pb2
from agentctx_common.canonical import struct_to_dict
from agentctx_common.errors import FieldViolation
from agentctx_common.protos import unknown_field_violations, value_violations
from agentctx_common.reasons import Reason
from context_service.domain.config import ContextConfig
from context_service.domain.event_validation import check_event, prepare_event, state_violations
from context_service.domain.limits import ALL, Limits, raise_if
from context_service.domain.model import JsonObject, SessionKey
from context_service.domain.names import check_session_id, new_id, parse_session_name, parse_user_parent
from context_service.domain.paging import (
    SessionQuery,
    decode_page_token,
    encode_page_token,
    page_size,
    parse_session_order,
)
from context_service.domain.session_records import SessionRecord, StateDelta
from context_service.domain.update_masks import only_config_fields, parse_update_mask
from context_service.domain.validation import check_config
from context_service.mapping.convert import (
    config_from_proto,
    config_to_proto,
    dict_to_struct,
    dt_to_ts,
    event_from_proto,
    event_to_proto,
    ts_to_dt,
)

if TYPE_CHECKING:
    from context_service.app import ContextApp

# Room left in a ListEvents response for framing and the page token.
_RESPONSE_MARGIN_BYTES = 64 * 1024
MAX_MOST_RECENT = 1_000_000


def session_to_proto(record: SessionRecord, out: session_pb2.Session | None = None) -> session_pb2.Session:
    out = out if out is not None else session_pb2.Session()
    out.name = record.key.name
    dict_to_struct(record.state, out.state)
    config_to_proto(record.config, out.config)
    out.etag = record.etag
    dt_to_ts(record.create_time, out.create_time)
    dt_to_ts(record.update_time, out.update_time)
    out.event_count = record.event_count
    out.last_sequence = record.last_sequence
    dict_to_struct(record.app_state, out.app_state)
    dict_to_struct(record.user_state, out.user_state)
    return out


def state_from_proto(state: struct_pb2.Struct, limits: Limits, path: str) -> JsonObject:
    value = struct_to_dict(state)
    raise_if(state_violations(value, state.ByteSize(), limits, path), Reason.INVALID_STATE)
    return value


def delta_from_proto(delta: session_pb2.StateDelta, limits: Limits) -> StateDelta:
    return StateDelta(
        session=state_from_proto(delta.session, limits, "state_delta.session"),
        user=state_from_proto(delta.user, limits, "state_delta.user"),
        app=state_from_proto(delta.app, limits, "state_delta.app"),
    )


class SessionRpcs:
    app: ContextApp

    # --- validation of request parts ------------------------------------------------

    def _state(self, state: struct_pb2.Struct, path: str) -> JsonObject:
        return state_from_proto(state, self.app.limits, path)

    def _config(self, config: policy_pb2.ContextConfig, path: str, fields: tuple[str, ...] | None = None) -> ContextConfig:
        """The client's config; only ``fields`` (default all) are validated,
        but unknown fields anywhere in it are rejected."""
        raise_if(unknown_field_violations(config, path) + value_violations(config, path), Reason.INVALID_CONTEXT_CONFIG)
        value = config_from_proto(config)
        check_config(value if fields is None else only_config_fields(value, fields), path)
        return value

    def _delta(self, delta: session_pb2.StateDelta) -> StateDelta:
        return delta_from_proto(delta, self.app.limits)

    # --- sessions ----------------------------------------------------------------------

    async def CreateSession(self, request: pb.CreateSessionRequest, context: grpc.aio.ServicerContext[Any, Any]) -> session_pb2.Session:
        caller = self.app.caller(context)
        limits = self.app.limits
        app, user = parse_user_parent(request.parent, limits, "parent")
        caller.require(app)
        if request.session_id:
            check_session_id(request.session_id, limits)
        key = SessionKey(app, user, request.session_id or new_id())
        state = self._state(request.session.state, "session.state")
        config = self._config(request.session.config, "session.config")
        app_state = self._state(request.session.app_state, "session.app_state")
        user_state = self._state(request.session.user_state, "session.user_state")
        record = await self.app.sessions.create_session(
            key, state=state, config=config, app_state=app_state, user_state=user_state
        )
        return session_to_proto(record)

    async def GetSharedState(self, request: pb.GetSharedStateRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.SharedState:
        caller = self.app.caller(context)
        app, user = parse_user_parent(request.parent, self.app.limits, "parent")
        caller.require(app)
        app_state, user_state = await self.app.sessions.get_shared_state(app, user)
        response = pb.SharedState()
        dict_to_struct(app_state, response.app_state)
        dict_to_struct(user_state, response.user_state)
        return response

    async def GetSession(self, request: pb.GetSessionRequest, context: grpc.aio.ServicerContext[Any, Any]) -> session_pb2.Session:
        caller = self.app.caller(context)
        key = parse_session_name(request.name, self.app.limits, "name")
        caller.require(key.app)
        return session_to_proto(await self.app.sessions.get_session(key))

    async def ListSessions(self, request: pb.ListSessionsRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.ListSessionsResponse:
        caller = self.app.caller(context)
        limits = self.app.limits
        app, user = parse_user_parent(request.parent, limits, "parent", wildcards=True)
        # "apps/-" lists only the apps this caller may use.
        query = SessionQuery(caller.visible_apps(None if app == ALL else app), None if user == ALL else user,
                             parse_session_order(request.order_by))
        size = page_size(request.page_size, limits.default_session_page_size, limits)
        page = await self.app.sessions.list_sessions(query, page_size=size, page_token=request.page_token)
        response = pb.ListSessionsResponse(next_page_token=page.next_page_token)
        for record in page.sessions:
            session_to_proto(record, response.sessions.add())
        return response

    async def UpdateSession(self, request: pb.UpdateSessionRequest, context: grpc.aio.ServicerContext[Any, Any]) -> session_pb2.Session:
        caller = self.app.caller(context)
        session = request.session
        key = parse_session_name(session.name, self.app.limits, "session.name")
        caller.require(key.app)
        change = parse_update_mask(request.update_mask.paths)
        # Unknown config fields are refused even when the mask leaves config out.
        config = self._config(session.config, "session.config", change.config_fields)
        record = await self.app.sessions.update_session(
            key,
            state=self._state(session.state, "session.state") if change.state else None,
            config=config if change.config_fields else None,
            config_fields=change.config_fields,
            expected_etag=session.etag or None,
        )
        return session_to_proto(record)

    async def DeleteSession(self, request: pb.DeleteSessionRequest, context: grpc.aio.ServicerContext[Any, Any]) -> empty_pb2.Empty:
        caller = self.app.caller(context)
        key = parse_session_name(request.name, self.app.limits, "name")
        caller.require(key.app)
        await self.app.sessions.delete_session(key, expected_etag=request.etag or None)
        return empty_pb2.Empty()

    # --- events ---------------------------------------------------------------------------

    async def AppendEvent(self, request: pb.AppendEventRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.AppendEventResponse:
        caller = self.app.caller(context)
        limits = self.app.limits
        key = parse_session_name(request.parent, limits, "parent")
        caller.require(key.app)
        raw = request.event
        raise_if(value_violations(raw, "event"), Reason.INVALID_EVENT)
        event = event_from_proto(raw)
        check_event(event, limits, size_bytes=raw.ByteSize(), now=dt.datetime.now(dt.UTC))
        delta = self._delta(request.state_delta) if request.HasField("state_delta") else None
        prepared = prepare_event(event)
        result = await self.app.sessions.append_event(
            key, prepared, expected_etag=request.expected_etag or None, state_delta=delta
        )
        response = pb.AppendEventResponse(session_etag=result.session_etag, deduplicated=result.deduplicated)
        if result.session_update_time is not None:
            dt_to_ts(result.session_update_time, response.session_update_time)
        stored = result.event
        if result.deduplicated or stored.content is not event.content:
            # Prepared, or a tool call's attachments collected into it.
            event_to_proto(stored, key, response.event)
        else:
            # The hot path: the stored event is the request's plus what the
            # server set, so copy the request rather than convert back.
            out = response.event
            out.CopyFrom(raw)
            out.name = key.event_name(stored.id)
            out.id = stored.id
            out.sequence = stored.sequence
            out.kind = event_pb2.EVENT_KIND_MESSAGE
            if not raw.HasField("create_time"):
                dt_to_ts(stored.create_time, out.create_time)
        return response

    async def BatchAppendEvents(self, request: pb.BatchAppendEventsRequest,
                                context: grpc.aio.ServicerContext[Any, Any]) -> pb.BatchAppendEventsResponse:
        caller = self.app.caller(context)
        limits = self.app.limits
        key = parse_session_name(request.parent, limits, "parent")
        caller.require(key.app)
        most = self.app.settings.max_turn_inputs
        if not request.events or len(request.events) > most:
            raise_if([FieldViolation(
                "events", f"has {len(request.events)} events; a batch takes 1 to {most} (max_turn_inputs)")],
                Reason.INVALID_EVENT)
        raise_if([v for i, raw in enumerate(request.events) for v in value_violations(raw, f"events[{i}]")],
                 Reason.INVALID_EVENT)
        now = dt.datetime.now(dt.UTC)
        events = []
        for i, raw in enumerate(request.events):
            event = event_from_proto(raw)
            check_event(event, limits, size_bytes=raw.ByteSize(), now=now, path=f"events[{i}]")
            events.append(prepare_event(event))
        ids = [e.id for e in events]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise_if([FieldViolation("events", f"repeats the event id {i!r}") for i in repeated], Reason.INVALID_EVENT)
        results = await self.app.sessions.append_events(key, events)
        response = pb.BatchAppendEventsResponse(session_etag=results[-1].session_etag)
        for result in results:
            event_to_proto(result.event, key, response.events.add())
        return response

    async def ListEvents(self, request: pb.ListEventsRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.ListEventsResponse:
        caller = self.app.caller(context)
        limits = self.app.limits
        key = parse_session_name(request.parent, limits, "parent")
        caller.require(key.app)
        size = page_size(request.page_size, limits.default_event_page_size, limits)
        violations = []
        if request.after_sequence < 0:
            violations.append(FieldViolation("after_sequence", "must not be negative"))
        if not 0 <= request.most_recent <= MAX_MOST_RECENT:
            violations.append(FieldViolation("most_recent", f"must be 0 to {MAX_MOST_RECENT}"))
        if request.HasField("after_time"):
            violations += value_violations(request.after_time, "after_time")
        raise_if(violations, Reason.INVALID_ARGUMENT)
        after_time = ts_to_dt(request.after_time) if request.HasField("after_time") else None
        scope = f"{key.name}|{request.include_compactions}|{request.after_sequence}"
        if after_time is not None or request.most_recent:
            scope += f"|{after_time.isoformat() if after_time else ''}|{request.most_recent}"
        token_after = decode_page_token(request.page_token, scope)
        after = max(request.after_sequence, token_after)
        events = await self.app.sessions.list_events(
            key, after_sequence=after, limit=size + 1, include_compactions=request.include_compactions,
            after_time=after_time,
            # Later pages resume after the first page's newest: already inside the window.
            most_recent=request.most_recent if not token_after else 0,
        )
        response = pb.ListEventsResponse()
        budget = self.app.settings.max_message_bytes - _RESPONSE_MARGIN_BYTES
        used = 0
        for event in events[:size]:
            item = event_to_proto(event, key)
            used += item.ByteSize() + 16  # 16: field tag and length, generously
            # Large events end a page early rather than exceed the message limit.
            if response.events and used > budget:
                break
            response.events.append(item)
        if len(response.events) < len(events):
            response.next_page_token = encode_page_token(scope, response.events[-1].sequence)
        return response

