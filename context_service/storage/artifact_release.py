"""Releasing artifact versions inside a write transaction: their rows
deleted, their blobs' refcounts lowered and the blobs no version names any
more deleted. Bytes in the database go in the same transaction; bytes
elsewhere (an object store) are listed as released in
``artifact_uploads`` ("r" + their key) in it, and deleted after the commit
by whoever can (the artifact store at once, the upload collector after a
crash). The artifact store's delete and the session store's
delete_session (a session's own artifacts) share it."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.storage.tables import artifact_blobs, artifact_chunks, artifact_uploads, artifact_versions

_V = artifact_versions.c
# An upload row naming released bytes to delete, not an upload in progress.
RELEASED = "r"
# The kind of the keys whose bytes are chunk rows in the database (storage.blobs_db).
DB_KIND = "u"


async def delete_chunks(conn: AsyncConnection, keys: list[str], app: str | None = None) -> None:
    """Inside the caller's write transaction: the chunk rows under ``keys``."""
    c = artifact_chunks.c
    where: sa.ColumnElement[bool] = c.blob_key.in_(keys)
    if app is not None:
        where = sa.and_(c.app == app, where)
    await conn.execute(sa.delete(artifact_chunks).where(where))


async def list_released(conn: AsyncConnection, app: str, key: str, now: dt.datetime) -> None:
    """Inside the caller's write transaction: ``key``'s bytes are no
    blob's, to be deleted (at once, by the collector)."""
    await conn.execute(sa.insert(artifact_uploads).values(upload_key=RELEASED + key, app=app, create_time=now))


async def release_versions(conn: AsyncConnection, where: sa.ColumnElement[bool],
                           released: list[tuple[str, str]] | None = None) -> int:
    """Deletes the version rows ``where`` selects, inside the caller's write
    transaction, and the blobs no version names any more; returns how many
    versions. (app, key) of released bytes outside the database are
    appended to ``released``. SessionStore.delete_session calls it for the
    session's own."""
    counted = (await conn.execute(
        sa.select(_V.app, _V.sha256, sa.func.count()).where(where).group_by(_V.app, _V.sha256)
    )).all()
    if not counted:
        return 0
    deleted = (await conn.execute(sa.delete(artifact_versions).where(where))).rowcount or 0
    b = artifact_blobs.c
    now = dt.datetime.now(dt.UTC)
    for app, sha, n in counted:
        await conn.execute(
            sa.update(artifact_blobs).where(b.app == app, b.sha256 == sha).values(refcount=b.refcount - n)
        )
        gone = (await conn.execute(
            sa.delete(artifact_blobs).where(b.app == app, b.sha256 == sha, b.refcount <= 0).returning(b.chunk_key)
        )).first()
        if gone is None:
            continue
        if gone.chunk_key.startswith(DB_KIND):
            await delete_chunks(conn, [gone.chunk_key], app)
        else:
            await list_released(conn, app, gone.chunk_key, now)
            if released is not None:
                released.append((app, gone.chunk_key))
    return int(deleted)


def session_artifacts(app: str, user: str, session: str) -> sa.ColumnElement[bool]:
    """A session's own artifacts (never the user's, whose session_id is "")."""
    return sa.and_(_V.app == app, _V.user_id == user, _V.session_id == session)


def staged_by(call: str) -> sa.ColumnElement[bool]:
    """The versions a tool call staged (release them to drop the call's saves)."""
    return _V.staged_call == call


async def publish_staged(conn: AsyncConnection, call: str) -> int:
    """Makes the versions ``call`` staged visible, in the caller's transaction."""
    result = await conn.execute(sa.update(artifact_versions).where(staged_by(call)).values(staged_call=None))
    return int(result.rowcount or 0)
