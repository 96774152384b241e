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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa

from context_service.domain.model import SessionKey
from context_service.domain.tool_tokens import OpenCall, Staged, ToolClaims
from context_service.storage.tables import tool_calls
from context_service.storage.tool_call_rows import (
    OPEN,
    any_open,
    drop,
    open_row,
    revoked,
    staged_from_text,
    staged_to_text,
)

if TYPE_CHECKING:
    from context_service.storage.sql_store import SqlSessionStore

_T = tool_calls.c


class SqlToolCalls:
    def __init__(self, store: SqlSessionStore) -> None:
        self._store = store

    async def open(self, calls: Sequence[OpenCall]) -> None:
        if not calls:
            return
        now = self._store.now()
        async with self._store.write_transaction() as conn:
            await conn.execute(sa.insert(tool_calls), [open_row(c, now) for c in calls])

    async def check(self, claims: ToolClaims) -> Staged:
        """The call's staged effects; PERMISSION_DENIED TOOL_TOKEN_REVOKED
        unless its row is open (one indexed read: the revocation check)."""
        reads = self._store.loop_reads
        row = reads.tool_call(claims.token_id) if reads is not None else None
        if row is None:
            async with self._store.read_connection() as conn:
                found = (await conn.execute(
                    sa.select(_T.state, _T.staged_json).where(_T.token_id == claims.token_id)
                )).first()
            row = (found.state, found.staged_json) if found is not None else ("", "{}")
        state, staged = row
        if state != OPEN:
            raise revoked()
        return staged_from_text(staged)

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
        async with self._store.read_connection() as conn:
            return await any_open(conn, key, call_ids)

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
                    await drop(conn, token_id)
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
