"""State shared across sessions (an app's, a user's in an app) on
SQLAlchemy Core: reading it, and the two operations of the append plan
that merge into it (``append_plan.LockSharedStates``/``WriteSharedStates``;
the merge itself is ``append_plan.merge_shared``'s). An append with a state
delta runs as one write transaction (``append_core``): the event, the
session's state and the shared states commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.domain.model import JsonObject
from context_service.storage import codec
from context_service.storage.tables import app_states, user_states

AppStates = dict[str, JsonObject]
UserStates = dict[tuple[str, str], JsonObject]


def _insert(conn: AsyncConnection, table: sa.Table) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _rows(apps: Iterable[str], users: Iterable[tuple[str, str]]
          ) -> Iterator[tuple[Any, sa.Table, sa.ColumnElement[bool], dict[str, str]]]:
    """(owner, table, where clause, key columns) of each state row: the apps' first."""
    for app in apps:
        yield app, app_states, app_states.c.app == app, {"app": app}
    for app, user in users:
        where = sa.and_(user_states.c.app == app, user_states.c.user_id == user)
        yield (app, user), user_states, where, {"app": app, "user_id": user}


async def lock_shared(conn: AsyncConnection, apps: Sequence[str], users: Sequence[tuple[str, str]],
                      now: dt.datetime) -> tuple[AppStates, UserStates]:
    """The rows created empty when missing, then read and locked."""
    found: tuple[AppStates, UserStates] = ({}, {})
    for owner, table, where, ids in _rows(apps, users):
        await conn.execute(_insert(conn, table).values(**ids, state_json="{}", update_time=now).on_conflict_do_nothing())
        row = (await conn.execute(sa.select(table.c.state_json).where(where).with_for_update())).first()
        states: dict[Any, JsonObject] = found[1] if table is user_states else found[0]
        states[owner] = json.loads(row.state_json) if row is not None else {}
    return found


async def write_shared(conn: AsyncConnection, apps: Mapping[str, JsonObject],
                       users: Mapping[tuple[str, str], JsonObject], now: dt.datetime) -> None:
    for owner, table, where, _ in _rows(apps, users):
        state = users[owner] if table is user_states else apps[owner]
        await conn.execute(sa.update(table).where(where).values(state_json=codec.dumps(state), update_time=now))


async def load_shared(conn: AsyncConnection, owners: Iterable[tuple[str, str]]) -> tuple[AppStates, UserStates]:
    """The app states and user states of (app, user) pairs."""
    pairs = sorted(set(owners))
    if not pairs:
        return {}, {}
    apps = sorted({a for a, _ in pairs})
    app_rows = await conn.execute(sa.select(app_states.c.app, app_states.c.state_json).where(app_states.c.app.in_(apps)))
    stmt = sa.select(user_states.c.app, user_states.c.user_id, user_states.c.state_json)
    if len(pairs) == 1:
        stmt = stmt.where(user_states.c.app == pairs[0][0], user_states.c.user_id == pairs[0][1])
    else:
        stmt = stmt.where(user_states.c.app.in_(apps), user_states.c.user_id.in_(sorted({u for _, u in pairs})))
    user_rows = await conn.execute(stmt)
    return (
        {r.app: json.loads(r.state_json) for r in app_rows},
        {(r.app, r.user_id): json.loads(r.state_json) for r in user_rows if (r.app, r.user_id) in set(pairs)},
    )
