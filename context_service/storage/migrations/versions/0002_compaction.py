"""Compaction: background jobs, and an index to find a session's latest
compaction without scanning its events.

Revision ID: 0002_compaction
Revises: 0001_sessions_events
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_compaction"
down_revision = "0001_sessions_events"
branch_labels = None
depends_on = None

BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UtcDateTime = sa.DateTime(timezone=True)
ACTIVE = sa.text("state IN ('pending', 'running')")


def upgrade() -> None:
    op.create_index("ix_events_session_pk_kind_sequence", "events", ["session_pk", "kind", "sequence"])
    op.create_table(
        "compaction_jobs",
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("session_pk", BigIntKey, nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.String(64)),
        sa.Column("lease_expires_at", UtcDateTime),
        sa.Column("not_before", UtcDateTime, nullable=False),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.Column("update_time", UtcDateTime, nullable=False),
        sa.Column("outcome", sa.String(64), nullable=False, server_default=""),
        sa.PrimaryKeyConstraint("job_id", name="pk_compaction_jobs"),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name="fk_compaction_jobs_session_pk_sessions", ondelete="CASCADE"
        ),
    )
    # At most one pending or running job per session.
    op.create_index(
        "uq_compaction_jobs_active_session", "compaction_jobs", ["session_pk"], unique=True,
        sqlite_where=ACTIVE, postgresql_where=ACTIVE,
    )
    op.create_index("ix_compaction_jobs_state_not_before", "compaction_jobs", ["state", "not_before"])


def downgrade() -> None:
    op.drop_index("ix_compaction_jobs_state_not_before", table_name="compaction_jobs")
    op.drop_index("uq_compaction_jobs_active_session", table_name="compaction_jobs")
    op.drop_table("compaction_jobs")
    op.drop_index("ix_events_session_pk_kind_sequence", table_name="events")
