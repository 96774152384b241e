"""Memory: entries per app and user with their metadata, and each backend's
full-text index: an FTS5 table over the text kept by triggers (SQLite,
ranked by bm25()), or a generated tsvector column with a GIN index
(PostgreSQL, ranked by ts_rank).

Revision ID: 0004_memory
Revises: 0003_shared_state
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_memory"
down_revision = "0003_shared_state"
branch_labels = None
depends_on = None

UtcDateTime = sa.DateTime(timezone=True)
BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_SQLITE_INDEX = (
    "CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='pk', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN "
    "INSERT INTO memories_fts(rowid, text) VALUES (new.pk, new.text); END",
    "CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.pk, old.text); END",
    "CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.pk, old.text); "
    "INSERT INTO memories_fts(rowid, text) VALUES (new.pk, new.text); END",
)
_POSTGRES_INDEX = (
    "ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX ix_memories_tsv ON memories USING GIN (tsv)",
)


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("pk", BigIntKey, autoincrement=True, nullable=False),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("memory_id", sa.String(128), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("metadata_json", sa.Text, nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False, server_default=""),
        sa.Column("event_id", sa.String(128), nullable=False, server_default=""),
        sa.Column("author", sa.String(128), nullable=False, server_default=""),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("pk", name="pk_memories"),
        sa.UniqueConstraint("app", "user_id", "memory_id", name="uq_memories_app_user_id_memory_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memories_source", "memories", ["app", "user_id", "session_id", "event_id"], unique=True,
                    sqlite_where=sa.text("event_id != ''"), postgresql_where=sa.text("event_id != ''"))
    op.create_table(
        "memory_metadata",
        sa.Column("memory_pk", BigIntKey, nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.ForeignKeyConstraint(["memory_pk"], ["memories.pk"], name="fk_memory_metadata_memory_pk_memories",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("memory_pk", "key", name="pk_memory_metadata"),
    )
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_INDEX if dialect == "sqlite" else _POSTGRES_INDEX if dialect == "postgresql" else ():
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("memories_fts_insert", "memories_fts_delete", "memories_fts_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    op.drop_table("memory_metadata")
    op.drop_index("ix_memories_source", table_name="memories")
    op.drop_table("memories")
