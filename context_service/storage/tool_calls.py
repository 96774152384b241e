"""ports.ToolCalls on the session store's engine: one ``tool_calls`` row
per minted tool token (see domain.tool_tokens and docs/ARCHITECTURE.md,
"Tool context").

A row is ``open`` from its mint until the function response that answers
its call is appended (``collect``, in the append's own transaction: the
staged state delta is merged into the event's, the staged attachments are
appended to its parts and the staged artifact versions are published), or
until it is past its deadline (``drop_expired``, or ``collect`` finding it
late: its staged versions are released with their bytes). Either way it is
no longer open, which every replica's ``check`` sees: that is revocation.
Staging (``stage``) locks the row and requires it open and live, so a
write either lands before the collection or is refused.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from agentctx_common.errors import PermissionDenied
from agentctx_common.reasons import Reason
from context_service.domain.model import Part, SessionKey
from context_service.domain.session_records import StateDelta
from context_service.domain.tool_tokens import OpenCall, Staged, ToolClaims, merge_delta
from context_service.storage import codec
from context_service.storage.artifact_release import publish_staged, release_versions, staged_by
from context_service.storage.tables import tool_calls

if TYPE_CHECKING:
    from context_service.storage.sql_store import SqlSessionStore

OPEN, COLLECTED, DROPPED = "open", "collected", "dropped"
_T = tool_calls.c


def staged_from_text(text: str) -> Staged:
    data = json.loads(text)
    state = data.get("state", {})
    return Staged(StateDelta(state.get("session", {}), state.get("user", {}), state.get("app", {})),
                  list(data.get("attachments", [])))


def staged_to_text(staged: Staged) -> str:
    delta = staged.delta
    state = {k: v for k, v in (("session", delta.session), ("user", delta.user), ("app", delta.app)) if v}
    return codec.dumps({"state": state, "attachments": staged.attachments})


@dataclass(frozen=True)
class Collected:
    """The effects of the calls an appended response answered."""

    delta: StateDelta
    parts: tuple[Part, ...]
    calls: int


def revoked() -> PermissionDenied:
    return PermissionDenied("the tool token was revoked: its call's response was appended or it expired",
                            reason=Reason.TOOL_TOKEN_REVOKED)


class SqlToolCalls:
    def __init__(self, store: SqlSessionStore) -> None:
        self._store = store

    async def open(self, calls: Sequence[OpenCall]) -> None:
        if not calls:
            return
        now = self._store.now()
        async with self._store.write_transaction() as conn:
            await conn.execute(sa.insert(tool_calls), [
                {"token_id": c.claims.token_id, "app": c.claims.app, "user_id": c.claims.user,
                 "session_id": c.claims.session, "call_id": c.claims.call_id, "event_id": c.claims.event_id,
                 "state": OPEN, "expire_time": c.expire_time, "staged_json": "{}", "create_time": now}
                for c in calls
            ])

    async def check(self, claims: ToolClaims) -> Staged:
        """The call's staged effects; PERMISSION_DENIED TOOL_TOKEN_REVOKED
        unless its row is open (one indexed read: the revocation check)."""
        async with self._store.read_connection() as conn:
            row = (await conn.execute(
                sa.select(_T.state, _T.staged_json).where(_T.token_id == claims.token_id)
            )).first()
        if row is None or row.state != OPEN:
            raise revoked()
        return staged_from_text(row.staged_json)

    async def stage(self, claims: ToolClaims, change: Callable[[Staged], None]) -> Staged:
        """Applies ``change`` to the open call's staged effects, under its
        row's lock; TOOL_TOKEN_REVOKED once collected or dropped."""
        async with self._store.write_transaction() as conn:
            row = (await conn.execute(
                sa.select(_T.state, _T.staged_json, _T.expire_time).where(_T.token_id == claims.token_id)
                .with_for_update()
            )).first()
            if row is None or row.state != OPEN or row.expire_time <= self._store.now():
                raise revoked()
            staged = staged_from_text(row.staged_json)
            change(staged)
            await conn.execute(sa.update(tool_calls).where(_T.token_id == claims.token_id)
                               .values(staged_json=staged_to_text(staged)))
        return staged

    async def any_open(self, key: SessionKey, call_ids: Sequence[str]) -> bool:
        """Whether a response to ``call_ids`` has an open call to collect."""
        async with self._store.read_connection() as conn:
            row = (await conn.execute(sa.select(_T.token_id).where(*_answering(key, call_ids)).limit(1))).first()
        return row is not None

    async def drop_expired(self, limit: int = 100) -> int:
        """Drops open calls past their deadline: their staged versions are
        released (bytes included); returns how many."""
        now = self._store.now()
        async with self._store.read_connection() as conn:
            ids = list((await conn.execute(
                sa.select(_T.token_id).where(_T.state == OPEN, _T.expire_time <= now).limit(limit)
            )).scalars())
        for token_id in ids:
            async with self._store.write_transaction() as conn:
                state = (await conn.execute(
                    sa.select(_T.state).where(_T.token_id == token_id).with_for_update()
                )).scalar_one_or_none()
                if state == OPEN:
                    await _drop(conn, token_id)
        return len(ids)

    async def purge(self, older_than: dt.timedelta, limit: int = 1000) -> int:
        """Deletes closed rows whose deadline is ``older_than`` past (no
        token of theirs verifies any more)."""
        cutoff = self._store.now() - older_than
        async with self._store.write_transaction() as conn:
            ids = list((await conn.execute(
                sa.select(_T.token_id).where(_T.state != OPEN, _T.expire_time < cutoff).limit(limit)
            )).scalars())
            if ids:
                await conn.execute(sa.delete(tool_calls).where(_T.token_id.in_(ids)))
        return len(ids)


def _answering(key: SessionKey, call_ids: Sequence[str]) -> tuple[sa.ColumnElement[bool], ...]:
    return (_T.app == key.app, _T.user_id == key.user, _T.session_id == key.session,
            _T.call_id.in_(sorted(set(call_ids))), _T.state == OPEN)


async def _drop(conn: AsyncConnection, token_id: str) -> None:
    await release_versions(conn, staged_by(token_id))
    await conn.execute(sa.update(tool_calls).where(_T.token_id == token_id).values(state=DROPPED, staged_json="{}"))


async def collect(conn: AsyncConnection, key: SessionKey, call_ids: Sequence[str], now: dt.datetime) -> Collected:
    """Inside an append's write transaction: closes the open calls the
    appended response answers, publishing the live ones' staged effects
    and dropping the late ones'."""
    rows = (await conn.execute(
        sa.select(_T.token_id, _T.staged_json, _T.expire_time).where(*_answering(key, call_ids))
        .order_by(_T.create_time, _T.token_id).with_for_update()
    )).all()
    delta: StateDelta = StateDelta()
    parts: list[Part] = []
    for row in rows:
        if row.expire_time <= now:
            await _drop(conn, row.token_id)
            continue
        staged = staged_from_text(row.staged_json)
        delta = merge_delta(delta, staged.delta)
        parts.extend(codec.part_from_json(p) for p in staged.attachments)
        await publish_staged(conn, row.token_id)
        await conn.execute(sa.update(tool_calls).where(_T.token_id == row.token_id)
                           .values(state=COLLECTED, staged_json="{}"))
    return Collected(delta, tuple(parts), len(rows))


async def drop_session_calls(conn: AsyncConnection, key: SessionKey) -> None:
    """A deleted session's calls: their staged versions (the user's
    "user:" ones included) released, their rows gone (tokens revoked)."""
    where = (_T.app == key.app, _T.user_id == key.user, _T.session_id == key.session)
    for token_id in (await conn.execute(sa.select(_T.token_id).where(*where, _T.state == OPEN))).scalars().all():
        await release_versions(conn, staged_by(token_id))
    await conn.execute(sa.delete(tool_calls).where(*where))
