"""Sessions and events.

Revision ID: 0001_sessions_events
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_sessions_events"
down_revision = None
branch_labels = None
depends_on = None

# Spelled out rather than imported from tables.py: a migration must keep
# meaning what it meant when it was written.
BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UtcDateTime = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("pk", BigIntKey, primary_key=True, autoincrement=True),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("incarnation", sa.String(32), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("last_sequence", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("event_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("state_json", sa.Text, nullable=False),
        sa.Column("config_json", sa.Text, nullable=False),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.Column("update_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("pk", name="pk_sessions"),
        sa.UniqueConstraint("app", "user_id", "session_id", name="uq_sessions_app_user_id_session_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_sessions_app_pk", "sessions", ["app", "pk"])
    op.create_index("ix_sessions_app_user_id_pk", "sessions", ["app", "user_id", "pk"])
    op.create_table(
        "events",
        sa.Column("session_pk", BigIntKey, nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("author", sa.String(128), nullable=False),
        sa.Column("invocation_id", sa.String(128), nullable=False, server_default=""),
        sa.Column("branch", sa.String(512), nullable=False, server_default=""),
        sa.Column("partial", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("turn_complete", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("body_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("session_pk", "sequence", name="pk_events"),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name="fk_events_session_pk_sessions", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("session_pk", "event_id", name="uq_events_session_pk_event_id"),
    )


def downgrade() -> None:
    op.drop_table("events")
    op.drop_index("ix_sessions_app_user_id_pk", table_name="sessions")
    op.drop_index("ix_sessions_app_pk", table_name="sessions")
    op.drop_table("sessions")
