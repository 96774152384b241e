"""Releasing artifact versions inside a write transaction: their rows
deleted, their blobs' refcounts lowered and the blobs no version names any
more deleted with their chunks. The artifact store's delete and the session
store's delete_session (a session's own artifacts) share it."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from context_service.storage.tables import artifact_blobs, artifact_chunks, artifact_versions

_V = artifact_versions.c


async def release_versions(conn: AsyncConnection, where: sa.ColumnElement[bool]) -> int:
    """Deletes the version rows ``where`` selects, inside the caller's write
    transaction, and the blobs no version names any more; returns how many
    versions. SessionStore.delete_session calls it for the session's own."""
    counted = (await conn.execute(
        sa.select(_V.app, _V.sha256, sa.func.count()).where(where).group_by(_V.app, _V.sha256)
    )).all()
    if not counted:
        return 0
    deleted = (await conn.execute(sa.delete(artifact_versions).where(where))).rowcount or 0
    b = artifact_blobs.c
    for app, sha, n in counted:
        await conn.execute(
            sa.update(artifact_blobs).where(b.app == app, b.sha256 == sha).values(refcount=b.refcount - n)
        )
        gone = (await conn.execute(
            sa.delete(artifact_blobs).where(b.app == app, b.sha256 == sha, b.refcount <= 0).returning(b.chunk_key)
        )).first()
        if gone is not None:
            await conn.execute(sa.delete(artifact_chunks).where(
                artifact_chunks.c.app == app, artifact_chunks.c.blob_key == gone.chunk_key
            ))
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
