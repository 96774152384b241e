"""Memory search owner lookup (SQLite): an index on (pk, app, user_id), so
a search checks each FTS5 match's owner in a narrow index instead of
reading the entry's row (its text, metadata and vector). The store names
it (``INDEXED BY``): SQLite otherwise looks a rowid up in the table. At 1M
entries of one user (bench.memory_search's corpus, a median 26k matches
per query) the lexical ranking took 45-48 ms instead of 67-77 ms, the
same results in the same order. PostgreSQL needs nothing here: its time
is the heap pages of the matches (ts_rank reads the tsvector there).

Revision ID: 0010_memory_owner_index
Revises: 0009_canonical_bodies
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0010_memory_owner_index"
down_revision = "0009_canonical_bodies"
branch_labels = None
depends_on = None

INDEX = "ix_memories_pk_owner"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"CREATE INDEX {INDEX} ON memories (pk, app, user_id)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP INDEX IF EXISTS {INDEX}")
