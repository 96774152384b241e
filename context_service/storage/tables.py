"""The schema as SQLAlchemy Core tables. Alembic migrations create it; a
new column or table needs a new revision under ``migrations/versions``.

JSON is stored as text written by ``codec`` (compact, keys sorted), which
keeps one code path for both backends; on PostgreSQL cast with ``::jsonb``
to query it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# BIGINT on PostgreSQL; INTEGER on SQLite so that the key is the rowid.
BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class UtcDateTime(sa.TypeDecorator[dt.datetime]):
    """Aware UTC datetimes on both backends (SQLite keeps no time zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        assert isinstance(value, dt.datetime)
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


sessions = sa.Table(
    "sessions",
    metadata,
    # Monotonic (AUTOINCREMENT on SQLite): listing pages by key never skips
    # a session created while paging.
    sa.Column("pk", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("app", sa.String(128), nullable=False),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("session_id", sa.String(128), nullable=False),
    # Random per creation: a re-created session never matches an old etag.
    sa.Column("incarnation", sa.String(32), nullable=False),
    # Bumped on every append and update; the etag is incarnation + version.
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("last_sequence", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("event_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("state_json", sa.Text, nullable=False),
    sa.Column("config_json", sa.Text, nullable=False),
    sa.Column("create_time", UtcDateTime, nullable=False),
    sa.Column("update_time", UtcDateTime, nullable=False),
    sa.UniqueConstraint("app", "user_id", "session_id"),
    sa.Index(None, "app", "pk"),
    sa.Index(None, "app", "user_id", "pk"),
    # ListSessions order_by "update_time".
    sa.Index(None, "app", "update_time"),
    sqlite_autoincrement=True,
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("session_pk", BigIntKey, sa.ForeignKey("sessions.pk", ondelete="CASCADE"), primary_key=True),
    # 1, 2, 3... per session, assigned under the session's row lock.
    sa.Column("sequence", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("event_id", sa.String(128), nullable=False),
    # MESSAGE or COMPACTION; a compaction's body is JSON like any other.
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("author", sa.String(128), nullable=False),
    sa.Column("invocation_id", sa.String(128), nullable=False, server_default=""),
    sa.Column("branch", sa.String(512), nullable=False, server_default=""),
    sa.Column("partial", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("turn_complete", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("create_time", UtcDateTime, nullable=False),
    # SHA-256 of the event as the client sent it: a retry with the same id
    # must carry the same fingerprint to count as the same event.
    sa.Column("fingerprint", sa.String(64), nullable=False),
    # Which body the fingerprint hashed (codec.FINGERPRINT_VERSION; 1: the
    # body before migration 0009, which a retry is then compared by).
    sa.Column("fingerprint_version", sa.SmallInteger, nullable=False, server_default="1"),
    # codec.event_body: the content's canonical JSON first, then the rest.
    sa.Column("body_json", sa.Text, nullable=False),
    sa.UniqueConstraint("session_pk", "event_id"),
)

# State shared by every session of an app, and by every session of a user in
# an app; merged by key by appends that carry a StateDelta. Deleting a
# session leaves them.
app_states = sa.Table(
    "app_states",
    metadata,
    sa.Column("app", sa.String(128), primary_key=True),
    sa.Column("state_json", sa.Text, nullable=False),
    sa.Column("update_time", UtcDateTime, nullable=False),
)

user_states = sa.Table(
    "user_states",
    metadata,
    sa.Column("app", sa.String(128), primary_key=True),
    sa.Column("user_id", sa.String(128), primary_key=True),
    sa.Column("state_json", sa.Text, nullable=False),
    sa.Column("update_time", UtcDateTime, nullable=False),
)

# Artifacts (migration 0005). Contents are content-addressed per app: one
# blob per (app, sha256), its bytes in chunk rows of at most 1 MiB, counted
# by how many versions name it and deleted with the last of them. An upload
# writes its chunks under a key of its own ("u" + 32 hex, listed in
# artifact_uploads until it commits or is collected); the commit makes that
# key the new blob's chunk_key (the rows are never rewritten), or drops them
# when the blob is stored already.
artifact_versions = sa.Table(
    "artifact_versions",
    metadata,
    sa.Column("pk", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("app", sa.String(128), nullable=False),
    sa.Column("user_id", sa.String(128), nullable=False),
    # "" for the user's artifacts ("user:" ids), shared by their sessions.
    sa.Column("session_id", sa.String(128), nullable=False),
    sa.Column("artifact", sa.String(512), nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("mime_type", sa.String(255), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("is_text", sa.Boolean, nullable=False),
    sa.Column("metadata_json", sa.Text, nullable=False),
    sa.Column("create_time", UtcDateTime, nullable=False),
    # The tool call (its token id) a staged version waits for: invisible
    # (but for that call's own reads) until its function response is
    # appended, dropped with its bytes at the call's deadline. NULL: visible.
    sa.Column("staged_call", sa.String(32), nullable=True),
    sa.UniqueConstraint("app", "user_id", "session_id", "artifact", "version"),
    sa.Index(None, "staged_call"),
    sqlite_autoincrement=True,
)

artifact_blobs = sa.Table(
    "artifact_blobs",
    metadata,
    sa.Column("app", sa.String(128), primary_key=True),
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("chunk_count", sa.Integer, nullable=False),
    # The upload key its chunk rows are stored under.
    sa.Column("chunk_key", sa.String(64), nullable=False),
    sa.Column("refcount", sa.BigInteger, nullable=False),
    sa.Column("create_time", UtcDateTime, nullable=False),
)

artifact_chunks = sa.Table(
    "artifact_chunks",
    metadata,
    sa.Column("app", sa.String(128), primary_key=True),
    # The upload's key: its blob's chunk_key once committed.
    sa.Column("blob_key", sa.String(64), primary_key=True),
    sa.Column("chunk_index", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

artifact_uploads = sa.Table(
    "artifact_uploads",
    metadata,
    sa.Column("upload_key", sa.String(64), primary_key=True),
    sa.Column("app", sa.String(128), nullable=False),
    sa.Column("create_time", UtcDateTime, nullable=False),
    sa.Index(None, "create_time"),
)
# Memory (MemoryService): entries per app and user. Not tied to sessions:
# memory outlives the session it came from. Each backend adds its search
# index in the migration, outside this metadata (``SEARCH_INDEX_OBJECTS``):
# on SQLite an FTS5 table over ``text`` kept by triggers, on PostgreSQL a
# generated tsvector column with a GIN index; SQLite also an index on
# (pk, app, user_id), the owner of each match read narrow (0010).
memories = sa.Table(
    "memories",
    metadata,
    # Never reused (AUTOINCREMENT on SQLite): it is the FTS5 rowid.
    sa.Column("pk", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("app", sa.String(128), nullable=False),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("memory_id", sa.String(128), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("metadata_json", sa.Text, nullable=False),
    # The source: a session of the same app and user, and an event of it.
    sa.Column("session_id", sa.String(128), nullable=False, server_default=""),
    sa.Column("event_id", sa.String(128), nullable=False, server_default=""),
    sa.Column("author", sa.String(128), nullable=False, server_default=""),
    sa.Column("create_time", UtcDateTime, nullable=False),
    # The text's embedding (packed float32, domain.memory.pack_vector) and
    # the model that made it; NULL and "" for an entry added without one.
    sa.Column("embedding", sa.LargeBinary, nullable=True),
    sa.Column("embedding_model", sa.String(128), nullable=False, server_default=""),
    sa.UniqueConstraint("app", "user_id", "memory_id"),
    # One entry per source event: add_session_to_memory is idempotent.
    sa.Index("ix_memories_source", "app", "user_id", "session_id", "event_id", unique=True,
             sqlite_where=sa.text("event_id != ''"), postgresql_where=sa.text("event_id != ''")),
    # A vector search reads the owner's newest vectors of one model (its bound).
    sa.Index(None, "app", "user_id", "embedding_model", "pk"),
    sqlite_autoincrement=True,
)

# Metadata by key, for equality filters (the entry's row keeps the JSON).
memory_metadata = sa.Table(
    "memory_metadata",
    metadata,
    sa.Column("memory_pk", BigIntKey, sa.ForeignKey("memories.pk", ondelete="CASCADE"), primary_key=True),
    sa.Column("key", sa.String(128), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# One row per minted tool token (domain.tool_tokens): its call, its
# deadline, its state (open; collected when the function response was
# appended; dropped at its deadline) and the effects staged against it (a
# state delta, attachments as Part JSON). Every replica checks the state:
# that is the revocation.
tool_calls = sa.Table(
    "tool_calls",
    metadata,
    sa.Column("token_id", sa.String(32), primary_key=True),
    sa.Column("app", sa.String(128), nullable=False),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("session_id", sa.String(128), nullable=False),
    sa.Column("call_id", sa.String(256), nullable=False),
    sa.Column("event_id", sa.String(128), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("expire_time", UtcDateTime, nullable=False),
    sa.Column("staged_json", sa.Text, nullable=False),
    sa.Column("create_time", UtcDateTime, nullable=False),
    sa.Index(None, "app", "user_id", "session_id", "call_id"),
    sa.Index(None, "state", "expire_time"),
)

# Each user's count of vector changes (set or deleted): a store's cached
# copy of the user's vectors is current while this is unchanged.
memory_vector_versions = sa.Table(
    "memory_vector_versions",
    metadata,
    sa.Column("app", sa.String(128), primary_key=True),
    sa.Column("user_id", sa.String(128), primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
)

# What each backend's migration adds for search and this metadata leaves
# out (schema comparisons skip them).
SEARCH_INDEX_OBJECTS = frozenset({
    "memories_fts", "memories_fts_data", "memories_fts_idx", "memories_fts_docsize", "memories_fts_config",
    "tsv", "ix_memories_tsv", "ix_memories_pk_owner",
})


def described_here(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's include_object: False for the search index objects."""
    return name not in SEARCH_INDEX_OBJECTS
