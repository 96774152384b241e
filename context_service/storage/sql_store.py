"""SessionStore on SQLAlchemy Core (SQLite or PostgreSQL).

Sequence numbers are assigned inside the write transaction while the
session's row is locked (SELECT ... FOR UPDATE on PostgreSQL, BEGIN
IMMEDIATE on SQLite), so appenders in any number of processes get 1, 2,
3... with no gap or duplicate; the (session, sequence) primary key and the
(session, event id) unique key back this up. A batch locks its sessions in
pk order, so two batches can never wait on each other in a cycle.

Every append runs the one append plan (append_plan decides and
``append_plan.execute`` drives it): through group commit (group_commit) on
the raw driver (append_sql), append_events as one all-or-nothing unit of
a group-commit batch (``append_plan.MixedUnit``), or, for an append with a
state delta, on SQLAlchemy Core in a write transaction (append_core);
everything else is SQLAlchemy Core.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa
from opentelemetry import metrics
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentctx_common.errors import AlreadyExists, ConfigError
from agentctx_common.reasons import Reason
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, EventKind, JsonObject, SessionKey
from context_service.domain.names import new_id
from context_service.domain.paging import (
    ORDER_UPDATE,
    SessionPage,
    SessionQuery,
    decode_page_token,
    decode_session_cursor,
    encode_page_token,
    encode_session_cursor,
)
from context_service.domain.session_records import AppendResult, SessionRecord, StateDelta
from context_service.domain.tool_tokens import OpenCall, merge_delta, response_ids
from context_service.domain.update_masks import apply_config_fields
from context_service.storage import codec, schema
from context_service.storage.append_core import CoreOps
from context_service.storage.append_plan import Append, Live, MixedUnit, execute, merge_shared, plan_all
from context_service.storage.append_plan import etag_mismatch as _etag_mismatch
from context_service.storage.append_plan import not_found as session_not_found
from context_service.storage.append_sql import appender_for
from context_service.storage.artifact_release import release_versions, session_artifacts
from context_service.storage.engine import (
    DRIVER_ERRORS,
    WRITE_OPTION,
    EngineOptions,
    create_engine,
    describe,
    is_sqlite,
    unavailable,
)
from context_service.storage.group_commit import GroupCommitter
from context_service.storage.shared_state import load_shared
from context_service.storage.tables import events, sessions
from context_service.storage.tool_call_rows import any_open, drop_session_calls, open_row
from context_service.storage.tool_call_rows import collect as collect_calls

if TYPE_CHECKING:
    from context_service.settings import ContextSettings

ALL_CONFIG_FIELDS = ("model", "selection", "compaction", "cache")

_meter = metrics.get_meter("agentctx.context.storage")
_batch_size = _meter.create_histogram("agentctx.append.batch_size", unit="{event}", description="Appends per commit.")
_batch_ms = _meter.create_histogram("agentctx.append.batch_duration", unit="ms", description="One batch, lock to commit.")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def key_clause(key: SessionKey) -> sa.ColumnElement[bool]:
    return sa.and_(sessions.c.app == key.app, sessions.c.user_id == key.user, sessions.c.session_id == key.session)


def _check_etag(current: str, expected: str | None) -> None:
    if expected is not None and expected != current:
        raise _etag_mismatch(current)


def _record(row: Any, **changes: Any) -> SessionRecord:
    values = {**row._mapping, **changes}
    return SessionRecord(
        key=SessionKey(values["app"], values["user_id"], values["session_id"]),
        state=json.loads(values["state_json"]),
        config=codec.config_from_text(values["config_json"]),
        etag=codec.etag(values["incarnation"], values["version"]),
        create_time=values["create_time"],
        update_time=values["update_time"],
        event_count=values["event_count"],
        last_sequence=values["last_sequence"],
        app_state=values.get("app_state", {}),
        user_state=values.get("user_state", {}),
    )


# Session columns a write needs (not the state and config JSON).
_LIVE_COLUMNS = (
    sessions.c.pk, sessions.c.app, sessions.c.user_id, sessions.c.session_id, sessions.c.incarnation,
    sessions.c.version, sessions.c.last_sequence, sessions.c.event_count,
)


class LoopReads(Protocol):
    """Event reads on the event loop's own thread (SQLite:
    ``heads.SqliteSessionHeads``); None: busy, read through the store."""

    def events_after(self, key: SessionKey, after_sequence: int, limit: int | None,
                     include_compactions: bool) -> list[Event] | None: ...

    def tool_call(self, token_id: str) -> tuple[str, str] | None: ...

    def any_open_call(self, key: SessionKey, call_ids: list[str]) -> bool | None: ...


class SqlSessionStore:
    """ports.SessionStore on one SQLAlchemy async engine. The storage
    package's other stores (compactions, compaction_jobs, lifecycle) use
    ``write_transaction``, ``read_connection``, ``lock_sessions`` and
    ``now``: a write through ``write_transaction`` is serialized with
    appends like any other."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        options: EngineOptions = EngineOptions(),
        max_batch: int = 256,
        clock: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.engine = engine
        self._appender = appender_for(engine, options)
        # SQLite: list_events reads on the event loop's thread (storage.factory sets it).
        self.loop_reads: LoopReads | None = None
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._clock = clock
        # SQLite has one writer at a time: this process's writers queue
        # here instead of in SQLite's busy handler, which sleeps and polls.
        self._write_lock = asyncio.Lock() if is_sqlite(engine) else contextlib.nullcontext()
        # Each item is a unit: one append, or append_events' all-or-nothing list.
        self._appends: GroupCommitter[tuple[Append, ...], list[AppendResult]] = GroupCommitter(
            self._append_batch, max_batch=max_batch)

    async def close(self) -> None:
        await self._appends.close()
        await self._appender.close()
        await self.engine.dispose()

    # The storage package's other stores (compactions, jobs, lifecycle) run
    # their SQL through these, so that every write takes the same lock and
    # every driver failure maps to the same status.

    def now(self) -> dt.datetime:
        return self._clock()

    @contextlib.asynccontextmanager
    async def write_transaction(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction, committed on exit (serialized on SQLite)."""
        async with self._write_lock:
            try:
                async with self._writer.begin() as conn:
                    yield conn
            except IntegrityError:
                raise
            except DRIVER_ERRORS as exc:
                raise unavailable(exc) from None

    @contextlib.asynccontextmanager
    async def read_connection(self) -> AsyncIterator[AsyncConnection]:
        """A read-only connection."""
        try:
            async with self.engine.connect() as conn:
                yield conn
        except DRIVER_ERRORS as exc:
            raise unavailable(exc) from None

    # --- sessions -------------------------------------------------------------

    async def create_session(self, key: SessionKey, *, state: JsonObject, config: ContextConfig,
                             app_state: JsonObject | None = None, user_state: JsonObject | None = None) -> SessionRecord:
        now = self._clock()
        incarnation = secrets.token_hex(6)
        values = {
            "app": key.app, "user_id": key.user, "session_id": key.session,
            "incarnation": incarnation, "version": 1, "last_sequence": 0, "event_count": 0,
            "state_json": codec.dumps(state), "config_json": codec.config_to_text(config),
            "create_time": now, "update_time": now,
        }
        try:
            async with self.write_transaction() as conn:
                await conn.execute(sa.insert(sessions).values(values))
                await execute(merge_shared([(key.app, key.user, app_state, user_state)], now),
                              CoreOps(conn, self.lock_sessions))
                apps, users = await load_shared(conn, [(key.app, key.user)])
        except IntegrityError:
            raise AlreadyExists(f"session {key.name} already exists", reason=Reason.SESSION_ALREADY_EXISTS) from None
        return SessionRecord(
            key=key, state=state, config=config, etag=codec.etag(incarnation, 1),
            create_time=now, update_time=now, event_count=0, last_sequence=0,
            app_state=apps.get(key.app, {}), user_state=users.get((key.app, key.user), {}),
        )

    async def get_session(self, key: SessionKey) -> SessionRecord:
        async with self.read_connection() as conn:
            row = (await conn.execute(sa.select(sessions).where(key_clause(key)))).first()
            if row is None:
                raise session_not_found(key)
            apps, users = await load_shared(conn, [(key.app, key.user)])
        return _record(row, app_state=apps.get(key.app, {}), user_state=users.get((key.app, key.user), {}))

    async def get_shared_state(self, app: str, user: str) -> tuple[JsonObject, JsonObject]:
        """(the app's state, the user's state in the app); empty when unset."""
        async with self.read_connection() as conn:
            apps, users = await load_shared(conn, [(app, user)])
        return apps.get(app, {}), users.get((app, user), {})

    async def list_sessions(self, query: SessionQuery, *, page_size: int, page_token: str = "") -> SessionPage:
        by_update = query.order == ORDER_UPDATE
        cursor = decode_session_cursor(page_token, query.scope) if by_update else None
        after = 0 if by_update else decode_page_token(page_token, query.scope)
        if query.apps is not None and not query.apps:
            return SessionPage([], "")
        stmt = sa.select(sessions).limit(page_size + 1)
        if by_update:
            # Keyset on (update_time, pk): a session updated while paging
            # moves behind the cursor and shows again on a later page.
            stmt = stmt.order_by(sessions.c.update_time, sessions.c.pk)
            if cursor is not None:
                stamp, pk = cursor
                stmt = stmt.where(sa.or_(sessions.c.update_time > stamp,
                                         sa.and_(sessions.c.update_time == stamp, sessions.c.pk > pk)))
        else:
            stmt = stmt.where(sessions.c.pk > after).order_by(sessions.c.pk)
        if query.apps is not None:
            stmt = stmt.where(sessions.c.app.in_(sorted(query.apps)))
        if query.user is not None:
            stmt = stmt.where(sessions.c.user_id == query.user)
        async with self.read_connection() as conn:
            rows = (await conn.execute(stmt)).all()
            more = len(rows) > page_size
            rows = rows[:page_size]
            apps, users = await load_shared(conn, [(r.app, r.user_id) for r in rows])
        token = ""
        if more:
            last = rows[-1]
            token = encode_session_cursor(query.scope, last.update_time, last.pk) if by_update else \
                encode_page_token(query.scope, last.pk)
        return SessionPage([
            _record(r, app_state=apps.get(r.app, {}), user_state=users.get((r.app, r.user_id), {})) for r in rows
        ], token)

    async def update_session(
        self,
        key: SessionKey,
        *,
        state: JsonObject | None = None,
        config: ContextConfig | None = None,
        config_fields: Collection[str] = ALL_CONFIG_FIELDS,
        expected_etag: str | None = None,
    ) -> SessionRecord:
        async with self.write_transaction() as conn:
            row = (await conn.execute(sa.select(sessions).where(key_clause(key)).with_for_update())).first()
            if row is None:
                raise session_not_found(key)
            _check_etag(codec.etag(row.incarnation, row.version), expected_etag)
            values: dict[str, Any] = {"version": row.version + 1, "update_time": self._clock()}
            if state is not None:
                values["state_json"] = codec.dumps(state)
            if config is not None:
                merged = apply_config_fields(codec.config_from_text(row.config_json), config, config_fields)
                values["config_json"] = codec.config_to_text(merged)
            await conn.execute(sa.update(sessions).where(sessions.c.pk == row.pk).values(values))
        return _record(row, **values)

    async def delete_session(self, key: SessionKey, *, expected_etag: str | None = None) -> None:
        async with self.write_transaction() as conn:
            stmt = sa.select(sessions.c.pk, sessions.c.incarnation, sessions.c.version).where(key_clause(key))
            row = (await conn.execute(stmt.with_for_update())).first()
            if row is None:
                raise session_not_found(key)
            _check_etag(codec.etag(row.incarnation, row.version), expected_etag)
            await conn.execute(sa.delete(events).where(events.c.session_pk == row.pk))
            await conn.execute(sa.delete(sessions).where(sessions.c.pk == row.pk))
            # Its own artifacts go with it; the user's ("user:") stay.
            await release_versions(conn, session_artifacts(key.app, key.user, key.session))
            await drop_session_calls(conn, key)

    # --- events -------------------------------------------------------------------

    async def append_event(self, key: SessionKey, event: Event, *, expected_etag: str | None = None,
                           state_delta: StateDelta | None = None, open_calls: Sequence[OpenCall] = ()) -> AppendResult:
        if not event.id:
            event = dataclasses.replace(event, id=new_id())
        body = codec.event_body(event)
        fingerprint = codec.event_fingerprint(event, body)
        now = self._clock()
        item = Append(key, event, expected_etag, body, fingerprint, state_delta,
                      tuple(open_row(c, now) for c in open_calls))
        if state_delta or await self._answers_open_calls([item]):
            # Its own transaction, so the event, its states and the tool
            # calls it answers commit together.
            return (await self._append_all([item]))[0]
        return (await self._appends.submit((item,)))[0]

    async def append_events(self, key: SessionKey, events: Sequence[Event]) -> list[AppendResult]:
        """ports.SessionStore.append_events: one all-or-nothing unit of a
        group-commit batch."""
        items = []
        for event in events:
            if not event.id:
                event = dataclasses.replace(event, id=new_id())
            body = codec.event_body(event)
            items.append(Append(key, event, None, body, codec.event_fingerprint(event, body)))
        if await self._answers_open_calls(items):
            # The tool calls they answer close in the same transaction.
            return await self._append_all(items, collect=True)
        return await self._appends.submit(tuple(items))

    async def _answers_open_calls(self, items: Sequence[Append]) -> bool:
        """Whether an item is a function response to a call with an open tool
        token (most appends answer none: no query)."""
        for item in items:
            ids = response_ids(item.event.content.parts) if item.event.content is not None else []
            if not ids:
                continue
            found = self.loop_reads.any_open_call(item.key, ids) if self.loop_reads is not None else None
            if found is None:
                async with self.read_connection() as conn:
                    found = await any_open(conn, item.key, ids)
            if found:
                return True
        return False

    async def _append_all(self, items: Sequence[Append], *, collect: bool = True) -> list[AppendResult]:
        """The plan on SQLAlchemy Core in a write transaction, all or nothing;
        with ``collect``, a function response closes the tool calls it
        answers in the same transaction (their staged effects join it)."""
        async with self.write_transaction() as conn:
            now = self._clock()
            if collect:
                items = [await self._collected(conn, item, now) for item in items]
            return await execute(plan_all(items, now), CoreOps(conn, self.lock_sessions))

    @staticmethod
    async def _collected(conn: AsyncConnection, item: Append, now: dt.datetime) -> Append:
        """``item`` with the staged effects of the open calls it answers: their
        state delta merged under its own, their attachments after its parts.
        The fingerprint stays the submitted event's, so a retry of the same
        append is recognized."""
        content = item.event.content
        ids = response_ids(content.parts) if content is not None else []
        if not ids:
            return item
        found = await collect_calls(conn, item.key, ids, now)
        if not found.calls or (not found.parts and not found.delta):
            return item
        event = item.event
        if found.parts and content is not None:
            event = dataclasses.replace(event, content=dataclasses.replace(content, parts=content.parts + found.parts))
        delta = merge_delta(found.delta, item.delta) if item.delta else found.delta
        return dataclasses.replace(item, event=event, body=codec.event_body(event), delta=delta or None,
                                   submitted=item.event)

    async def _append_batch(self, units: Sequence[tuple[Append, ...]]) -> list[list[AppendResult] | Exception]:
        """One transaction for every unit; each unit's results, or its first
        error. A unit that would be stored in part rolls the batch back:
        group commit then runs each unit alone."""
        items = [dataclasses.replace(a, unit=u + 1) if len(unit) > 1 else a
                 for u, unit in enumerate(units) for a in unit]
        async with self._write_lock:
            started = time.perf_counter()
            try:
                results = await self._appender.run(items, self._clock())
            except MixedUnit as mixed:
                if len(units) > 1:
                    raise
                return [mixed.errors[1]]
            except DRIVER_ERRORS as exc:
                raise unavailable(exc) from None
        attributes = {"db.system": self.engine.dialect.name}
        _batch_size.record(len(items), attributes)
        _batch_ms.record((time.perf_counter() - started) * 1000, attributes)
        out: list[list[AppendResult] | Exception] = []
        at = 0
        for unit in units:
            mine = results[at:at + len(unit)]
            at += len(unit)
            error = next((r for r in mine if isinstance(r, Exception)), None)
            out.append(error if error is not None else [r for r in mine if not isinstance(r, Exception)])
        return out

    async def lock_sessions(self, conn: AsyncConnection, keys: set[SessionKey]) -> dict[SessionKey, Live]:
        """The sessions' rows, locked in pk order, for write transactions on
        SQLAlchemy (append_core, compaction commits, jobs); group commit locks
        in append_sql."""
        stmt = sa.select(*_LIVE_COLUMNS)
        if len(keys) == 1:
            stmt = stmt.where(key_clause(next(iter(keys))))
        else:
            wanted = sorted((k.app, k.user, k.session) for k in keys)
            stmt = stmt.where(sa.tuple_(sessions.c.app, sessions.c.user_id, sessions.c.session_id).in_(wanted))
        rows = await conn.execute(stmt.order_by(sessions.c.pk).with_for_update())
        return {
            SessionKey(r.app, r.user_id, r.session_id): Live(r.pk, r.incarnation, r.version, r.last_sequence, r.event_count)
            for r in rows
        }

    async def get_event(self, key: SessionKey, event_id: str) -> Event | None:
        stmt = (
            sa.select(events)
            .join(sessions, events.c.session_pk == sessions.c.pk)
            .where(key_clause(key), events.c.event_id == event_id)
        )
        async with self.read_connection() as conn:
            row = (await conn.execute(stmt)).first()
            if row is None:
                await self._require_session(conn, key)
                return None
        return codec.event_from_row(row)

    async def list_events(
        self,
        key: SessionKey,
        *,
        after_sequence: int = 0,
        limit: int | None = None,
        include_compactions: bool = True,
        after_time: dt.datetime | None = None,
        most_recent: int = 0,
    ) -> list[Event]:
        """``after_time``: created at or after it; ``most_recent``: of the
        events passing the other filters, only that many newest."""
        if self.loop_reads is not None and after_time is None and most_recent <= 0:
            found = self.loop_reads.events_after(key, after_sequence, limit, include_compactions)
            if found is not None:
                return found
        def filtered(stmt: sa.Select[Any]) -> sa.Select[Any]:
            stmt = stmt.join(sessions, events.c.session_pk == sessions.c.pk).where(
                key_clause(key), events.c.sequence > after_sequence)
            if not include_compactions:
                stmt = stmt.where(events.c.kind == EventKind.MESSAGE.value)
            if after_time is not None:
                stmt = stmt.where(events.c.create_time >= after_time)
            return stmt

        stmt = filtered(sa.select(events)).order_by(events.c.sequence)
        if most_recent > 0:
            newest = filtered(sa.select(events.c.sequence)).order_by(events.c.sequence.desc()).limit(most_recent)
            stmt = stmt.where(events.c.sequence >= sa.select(sa.func.min(newest.subquery().c.sequence)).scalar_subquery())
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self.read_connection() as conn:
            rows = (await conn.execute(stmt)).all()
            if not rows:
                await self._require_session(conn, key)
        return [codec.event_from_row(r) for r in rows]

    async def list_events_before(self, key: SessionKey, *, before_sequence: int, limit: int) -> list[Event]:
        """The ``limit`` newest events with a sequence below
        ``before_sequence`` (0: no bound), in sequence order: one page of a
        newest-first read, on the events' primary key."""
        stmt = sa.select(events).join(sessions, events.c.session_pk == sessions.c.pk).where(key_clause(key))
        if before_sequence > 0:
            stmt = stmt.where(events.c.sequence < before_sequence)
        stmt = stmt.order_by(events.c.sequence.desc()).limit(limit)
        async with self.read_connection() as conn:
            rows = (await conn.execute(stmt)).all()
            if not rows:
                await self._require_session(conn, key)
        return [codec.event_from_row(r) for r in reversed(rows)]

    async def latest_compaction(self, key: SessionKey) -> Event | None:
        """The session's newest COMPACTION event, if any (one indexed read)."""
        stmt = (
            sa.select(events)
            .join(sessions, events.c.session_pk == sessions.c.pk)
            .where(key_clause(key), events.c.kind == EventKind.COMPACTION.value)
            .order_by(events.c.sequence.desc())
            .limit(1)
        )
        async with self.read_connection() as conn:
            row = (await conn.execute(stmt)).first()
            if row is None:
                await self._require_session(conn, key)
        return None if row is None else codec.event_from_row(row)

    async def _require_session(self, conn: AsyncConnection, key: SessionKey) -> None:
        if (await conn.execute(sa.select(sessions.c.pk).where(key_clause(key)))).first() is None:
            raise session_not_found(key)


async def open_store(
    url: str,
    *,
    options: EngineOptions = EngineOptions(),
    max_batch: int = 256,
    create_if_empty: bool = False,
    config_hint: str = "--config FILE",
) -> SqlSessionStore:
    """Opens the store after checking the schema is exactly this code's.

    A database with no tables at all is migrated when ``create_if_empty``;
    anything else that is not current is a ConfigError naming the fix.
    """
    engine = create_engine(url, options)
    where = describe(engine.url)
    try:
        status = await schema.schema_status(engine)
        if status.state is schema.SchemaState.EMPTY and create_if_empty:
            await schema.upgrade(engine)
        elif status.state is schema.SchemaState.AHEAD:
            raise ConfigError(
                f"database {where} has schema revision {status.revision}, newer than this code ({status.head}); "
                "upgrade agentctx or use another database"
            )
        elif status.state is not schema.SchemaState.CURRENT:
            raise ConfigError(
                f"database {where} schema is older than this code (at {status.revision or 'no revision'}, "
                f"needs {status.head}): run `{schema.UPGRADE_COMMAND} {config_hint}`"
            )
    except ConfigError:
        await engine.dispose()
        raise
    except DRIVER_ERRORS as exc:
        await engine.dispose()
        raise ConfigError(f"cannot open database {where}: {type(getattr(exc, 'orig', exc)).__name__}") from None
    return SqlSessionStore(engine, options=options, max_batch=max_batch)


def engine_options(settings: ContextSettings) -> EngineOptions:
    return EngineOptions(
        sqlite_synchronous=settings.sqlite_synchronous,
        sqlite_busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        pool_size=settings.db_pool_size,
    )


async def open_from_settings(settings: ContextSettings) -> SqlSessionStore:
    """The store the settings describe; only the embedded SQLite default
    (no database_url) may create its schema on first start."""
    return await open_store(
        settings.resolved_database_url,
        options=engine_options(settings),
        max_batch=settings.append_batch_max,
        create_if_empty=settings.db_create_if_empty and not settings.database_url,
    )
