"""Tool calls (one row per minted tool token: its state and staged
effects) and artifact versions staged against a tool call.

Revision ID: 0006_tool_calls
Revises: 0005_artifacts
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_tool_calls"
down_revision = "0005_artifacts"
branch_labels = None
depends_on = None

UtcDateTime = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("token_id", sa.String(32), nullable=False),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("call_id", sa.String(256), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("expire_time", UtcDateTime, nullable=False),
        sa.Column("staged_json", sa.Text, nullable=False),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("token_id", name="pk_tool_calls"),
    )
    op.create_index("ix_tool_calls_app_user_id_session_id_call_id", "tool_calls",
                    ["app", "user_id", "session_id", "call_id"])
    op.create_index("ix_tool_calls_state_expire_time", "tool_calls", ["state", "expire_time"])
    with op.batch_alter_table("artifact_versions") as batch:
        batch.add_column(sa.Column("staged_call", sa.String(32), nullable=True))
        batch.create_index("ix_artifact_versions_staged_call", ["staged_call"])


def downgrade() -> None:
    with op.batch_alter_table("artifact_versions") as batch:
        batch.drop_index("ix_artifact_versions_staged_call")
        batch.drop_column("staged_call")
    op.drop_index("ix_tool_calls_state_expire_time", table_name="tool_calls")
    op.drop_index("ix_tool_calls_app_user_id_session_id_call_id", table_name="tool_calls")
    op.drop_table("tool_calls")
