"""Artifacts: versions (metadata per saved version), content-addressed
blobs per app with their 1 MiB chunk rows (under the key of the upload
that stored them), and uploads in progress.

Revision ID: 0005_artifacts
Revises: 0004_memory
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_artifacts"
down_revision = "0004_memory"
branch_labels = None
depends_on = None

UtcDateTime = sa.DateTime(timezone=True)
BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "artifact_versions",
        sa.Column("pk", BigIntKey, autoincrement=True, nullable=False),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("artifact", sa.String(512), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("mime_type", sa.String(255), nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("is_text", sa.Boolean, nullable=False),
        sa.Column("metadata_json", sa.Text, nullable=False),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("pk", name="pk_artifact_versions"),
        sa.UniqueConstraint("app", "user_id", "session_id", "artifact", "version",
                            name="uq_artifact_versions_app_user_id_session_id_artifact_version"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "artifact_blobs",
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        sa.Column("chunk_key", sa.String(64), nullable=False),
        sa.Column("refcount", sa.BigInteger, nullable=False),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("app", "sha256", name="pk_artifact_blobs"),
    )
    op.create_table(
        "artifact_chunks",
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("blob_key", sa.String(64), nullable=False),
        sa.Column("chunk_index", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("app", "blob_key", "chunk_index", name="pk_artifact_chunks"),
    )
    op.create_table(
        "artifact_uploads",
        sa.Column("upload_key", sa.String(64), nullable=False),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("create_time", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("upload_key", name="pk_artifact_uploads"),
    )
    op.create_index("ix_artifact_uploads_create_time", "artifact_uploads", ["create_time"])


def downgrade() -> None:
    op.drop_index("ix_artifact_uploads_create_time", table_name="artifact_uploads")
    op.drop_table("artifact_uploads")
    op.drop_table("artifact_chunks")
    op.drop_table("artifact_blobs")
    op.drop_table("artifact_versions")
