"""Memory vectors in order: an index on (app, user_id, embedding_model, pk)
so a vector search reads a user's newest vectors of one model
(``ORDER BY pk DESC LIMIT``, the store's bound) by walking the index,
never every entry of the user and a sort.

Revision ID: 0008_memory_vector_order
Revises: 0007_memory_vectors
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0008_memory_vector_order"
down_revision = "0007_memory_vectors"
branch_labels = None
depends_on = None

INDEX = "ix_memories_app_user_id_embedding_model_pk"


def upgrade() -> None:
    op.create_index(INDEX, "memories", ["app", "user_id", "embedding_model", "pk"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="memories")
