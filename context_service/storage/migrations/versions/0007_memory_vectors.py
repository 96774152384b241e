"""Memory vectors: each entry may carry the embedding of its text (packed
float32, little-endian) and the embedding model that made it, for
semantic search (domain.memory.fuse). Entries without one (semantic mode
off when they were added, or the cache tier unreachable) have NULL and an
empty model: lexical search still finds them. No vector extension: the
store compares vectors itself.

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


def downgrade() -> None:
    # SQLite 3.35+ drops a column in place (the FTS5 triggers stay).
    op.drop_column("memories", "embedding_model")
    op.drop_column("memories", "embedding")
