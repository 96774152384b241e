"""Memory search (PostgreSQL): the GIN index on ``tsv`` without its pending
list (``fastupdate = off``). With it, new entries wait in an unsorted list
that every search scans in full until an insert passes
``gin_pending_list_limit`` (4 MB) or autovacuum merges it: at 10k entries
a search took 8.6-9.6 ms p50 right after its entries were added and
2.8-3.1 ms once the list was merged. Without it each insert updates the
index in place: loading 10k entries took 4.4-4.9 s either way
(bench.memory_search's corpus, batches of 5,000), and searches never
scan a pending list (2.4-2.7 ms p50). The list left by earlier inserts
is merged here. SQLite's FTS5 has no such list.

Revision ID: 0011_memory_gin_fastupdate
Revises: 0010_memory_owner_index
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0011_memory_gin_fastupdate"
down_revision = "0010_memory_owner_index"
branch_labels = None
depends_on = None

INDEX = "ix_memories_tsv"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER INDEX {INDEX} SET (fastupdate = off)")
        op.execute(f"SELECT gin_clean_pending_list('{INDEX}'::regclass)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER INDEX {INDEX} RESET (fastupdate)")
