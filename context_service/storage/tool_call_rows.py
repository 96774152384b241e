"""The ``tool_calls`` rows inside a caller's transaction: the
collection an append runs (``collect``), a deleted session's calls, and
the staged effects' JSON. ``tool_calls.SqlToolCalls`` is the port on top;
the session store's appends call these (see storage.tool_calls)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from agentctx_common.errors import PermissionDenied
from agentctx_common.reasons import Reason
from context_service.domain.model import Part, SessionKey
from context_service.domain.session_records import StateDelta
from context_service.domain.tool_tokens import OpenCall, Staged, merge_delta
from context_service.storage import codec
from context_service.storage.artifact_release import publish_staged, release_versions, staged_by
from context_service.storage.tables import tool_calls

OPEN, COLLECTED, DROPPED = "open", "collected", "dropped"
_T = tool_calls.c


def open_row(call: OpenCall, now: dt.datetime) -> dict[str, Any]:
    """The ``tool_calls`` row of a minted token (TOOL_CALL_COLUMNS)."""
    c = call.claims
    return {"token_id": c.token_id, "app": c.app, "user_id": c.user, "session_id": c.session, "call_id": c.call_id,
            "event_id": c.event_id, "state": OPEN, "expire_time": call.expire_time, "staged_json": "{}",
            "create_time": now}


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


def answering(key: SessionKey, call_ids: Sequence[str]) -> tuple[sa.ColumnElement[bool], ...]:
    return (_T.app == key.app, _T.user_id == key.user, _T.session_id == key.session,
            _T.call_id.in_(sorted(set(call_ids))), _T.state == OPEN)


async def drop(conn: AsyncConnection, token_id: str) -> None:
    await release_versions(conn, staged_by(token_id))
    await conn.execute(sa.update(tool_calls).where(_T.token_id == token_id).values(state=DROPPED, staged_json="{}"))


async def collect(conn: AsyncConnection, key: SessionKey, call_ids: Sequence[str], now: dt.datetime) -> Collected:
    """Inside an append's write transaction: closes the open calls the
    appended response answers, publishing the live ones' staged effects
    and dropping the late ones'."""
    rows = (await conn.execute(
        sa.select(_T.token_id, _T.staged_json, _T.expire_time).where(*answering(key, call_ids))
        .order_by(_T.create_time, _T.token_id).with_for_update()
    )).all()
    delta: StateDelta = StateDelta()
    parts: list[Part] = []
    for row in rows:
        if row.expire_time <= now:
            await drop(conn, row.token_id)
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


async def any_open(conn: AsyncConnection, key: SessionKey, call_ids: Sequence[str]) -> bool:
    """Whether a response to ``call_ids`` has an open call to collect."""
    row = (await conn.execute(sa.select(_T.token_id).where(*answering(key, call_ids)).limit(1))).first()
    return row is not None
