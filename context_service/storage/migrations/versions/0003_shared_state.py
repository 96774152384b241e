"""Shared state: the state every session of an app shares, the state every
session of a user in an app shares (ADK's ``app:`` and ``user:`` scopes),
and an index to list an app's sessions by update time.

Revision ID: 0003_shared_state
Revises: 0002_compaction
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_shared_state"
down_revision = "0002_compaction"
branch_labels = None
depends_on = None

UtcDateTime = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "app_states",
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("state_json", sa.Text, nullable=False),
        sa.Column("update_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("app", name="pk_app_states"),
    )
    op.create_table(
        "user_states",
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("state_json", sa.Text, nullable=False),
        sa.Column("update_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("app", "user_id", name="pk_user_states"),
    )
    op.create_index("ix_sessions_app_update_time", "sessions", ["app", "update_time"])


def downgrade() -> None:
    op.drop_index("ix_sessions_app_update_time", table_name="sessions")
    op.drop_table("user_states")
    op.drop_table("app_states")
