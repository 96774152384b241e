"""Memory vectors: each entry may carry the embedding of its text (packed
float32, little-endian) and the embedding model that made it, for
semantic search (domain.memory.fuse). Entries without one (semantic mode
off when they were added, or the cache tier unreachable) have NULL and an
empty model: lexical search still finds them. No vector extension: the
store compares vectors itself. ``memory_vector_versions`` counts each
user's vector changes (set or deleted), so a replica's in-process copy of
the user's vectors is known current by one small read.

Revision ID: 0007_memory_vectors
Revises: 0006_tool_calls
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_memory_vectors"
down_revision = "0006_tool_calls"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("embedding", sa.LargeBinary, nullable=True))
    op.add_column("memories", sa.Column("embedding_model", sa.String(128), nullable=False, server_default=""))
    op.create_table(
        "memory_vector_versions",
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("app", "user_id", name="pk_memory_vector_versions"),
    )


def downgrade() -> None:
    op.drop_table("memory_vector_versions")
    # SQLite 3.35+ drops a column in place (the FTS5 triggers stay).
    op.drop_column("memories", "embedding_model")
    op.drop_column("memories", "embedding")
