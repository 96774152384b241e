"""Stored bodies in the canonical form: an event's body holds its content's
canonical JSON (camelCase part keys, the bytes the cache key hashes), and
staged attachments their parts in the same spelling; ``fingerprint_version``
says which body a stored fingerprint hashed.

Fingerprints are not recomputed (they cannot be: the header hashed the
create time as the client sent it, the row holds the server's, and a body
with collected attachments kept the fingerprint of the body without them):
existing rows are version 1, compared with ``codec.legacy_fingerprint`` when
an event id repeats. Bodies are rewritten a page of rows at a time, in
primary-key order, so a large table is never one statement or one list in
memory; rewriting a rewritten body changes nothing, so the step is
idempotent. The key respelling walks the kind table (``storage/codec.py``);
a JSON payload's numbers come out as a Struct carries them, the values every
read already returned on the wire.

Downgrade respells the bodies back and drops the column; events appended
since keep their version-2 fingerprint, so the older code takes a retry of
one of those for a conflicting event.

Revision ID: 0009_canonical_bodies
Revises: 0008_memory_vector_order
Create Date: 2026-12-04
"""

from __future__ import annotations

import json
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

from context_service.storage import codec

revision = "0009_canonical_bodies"
down_revision = "0008_memory_vector_order"
branch_labels = None
depends_on = None

PAGE = 500


def _rewrite_events(conn: sa.Connection, rewrite: Callable[[str], str]) -> None:
    after = (-1, -1)
    select = sa.text(
        "SELECT session_pk, sequence, body_json FROM events "
        "WHERE session_pk > :pk OR (session_pk = :pk AND sequence > :seq) "
        "ORDER BY session_pk, sequence LIMIT :n"
    )
    update = sa.text("UPDATE events SET body_json = :body WHERE session_pk = :pk AND sequence = :seq")
    while True:
        rows = conn.execute(select, {"pk": after[0], "seq": after[1], "n": PAGE}).all()
        if not rows:
            return
        changed = []
        for pk, seq, body in rows:
            new = rewrite(body)
            if new != body:
                changed.append({"body": new, "pk": pk, "seq": seq})
        if changed:
            conn.execute(update, changed)
        after = (rows[-1][0], rows[-1][1])


def _rewrite_staged(conn: sa.Connection, respell: Callable[[dict[str, object]], dict[str, object]]) -> None:
    after = ""
    select = sa.text("SELECT token_id, staged_json FROM tool_calls WHERE token_id > :after "
                     "ORDER BY token_id LIMIT :n")
    update = sa.text("UPDATE tool_calls SET staged_json = :staged WHERE token_id = :token")
    while True:
        rows = conn.execute(select, {"after": after, "n": PAGE}).all()
        if not rows:
            return
        changed = []
        for token, text in rows:
            staged = json.loads(text)
            if staged.get("attachments"):
                staged["attachments"] = [respell(p) for p in staged["attachments"]]
                new = codec.dumps(staged)
                if new != text:
                    changed.append({"staged": new, "token": token})
        if changed:
            conn.execute(update, changed)
        after = rows[-1][0]


def upgrade() -> None:
    op.add_column("events", sa.Column("fingerprint_version", sa.SmallInteger, nullable=False,
                                      server_default=str(codec.LEGACY_FINGERPRINT)))
    conn = op.get_bind()
    _rewrite_events(conn, codec.body_from_legacy)
    _rewrite_staged(conn, codec.part_from_legacy)


def downgrade() -> None:
    conn = op.get_bind()
    _rewrite_staged(conn, codec.part_to_legacy)
    _rewrite_events(conn, codec.body_to_legacy)
    with op.batch_alter_table("events") as batch:
        batch.drop_column("fingerprint_version")
