"""Context service settings: ``AGENTCTX_CONTEXT_*`` environment variables or
the ``[context]`` table of the config file."""

from __future__ import annotations

import pathlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from agentctx_common.settings import ServerSettings, _is_loopback
from context_service.domain.config_defaults import config_from_defaults
from context_service.domain.json_depth import DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH_CEILING


class BearerToken(BaseModel):
    """A bearer token grant. Only the token's SHA-256 is configured:
    ``printf %s "$TOKEN" | sha256sum``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="Safe to log; names the caller.")
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$", description="SHA-256 (hex) of the token.")
    apps: list[str] = Field(min_length=1, description="Apps the token may use; '*' = all.")


class ToolTokenKey(BaseModel):
    """One tool token signing key of the key set the context replicas share."""

    id: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")
    secret: SecretStr = Field(description="At least 32 bytes of randomness (any text; used as HMAC key).")

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value().encode()) < 32:
            raise ValueError("a tool token key needs at least 32 bytes")
        return value


class ContextSettings(ServerSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTCTX_CONTEXT_")
    config_table = "context"

    port: int = Field(50051, ge=0, le=65535)
    data_dir: pathlib.Path = Field(pathlib.Path(".agentctx/data"), description="Where the SQLite file lives.")
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL, e.g. postgresql+asyncpg://host/db. Empty: SQLite in data_dir.",
    )
    default_model: str = Field("local-sim-1", description="Model for sessions that name none.")

    # The cache service, reached over mTLS.
    cache_target: str = Field(
        "127.0.0.1:50052", description="The cache service: host:port, or a set of replicas (dns:///name:port, "
        "ipv4:host:port,host:port), balanced round-robin over the healthy ones.",
    )
    cache_ca: pathlib.Path | None = Field(None, description="CA that signs the cache service's certificate.")
    cache_cert: pathlib.Path | None = Field(None, description="This service's client certificate.")
    cache_key: pathlib.Path | None = Field(None, description="This service's client key.")
    cache_server_name: str = Field("localhost", description="Name to verify on the cache service's certificate.")
    cache_timeout_s: float = Field(60.0, gt=0, description="Upper bound for one cache-service call.")

    # Compaction: remote compactors and the background worker.
    remote_compactor_targets: list[str] = Field(
        default_factory=list,
        description="host:port targets a REMOTE compaction policy may name; '*' allows any. Empty: REMOTE is refused.",
    )
    remote_compactor_ca: pathlib.Path | None = Field(None, description="CA for remote compactors; unset: plaintext.")
    remote_compactor_cert: pathlib.Path | None = Field(None, description="Client certificate for remote compactors.")
    remote_compactor_key: pathlib.Path | None = Field(None, description="Client key for remote compactors.")
    compaction_worker: bool = Field(True, description="Run background compaction jobs in this process.")
    compaction_worker_concurrency: int = Field(2, ge=1, le=64, description="Jobs one process runs at once.")
    compaction_job_lease_s: float = Field(30.0, gt=0, description="A claimed job is retaken after this without a heartbeat.")
    compaction_job_poll_s: float = Field(1.0, gt=0, description="How often an idle worker looks for jobs.")
    compaction_job_max_attempts: int = Field(3, ge=1, description="Attempts before a failing job is given up.")
    compaction_extractive_processes: int = Field(
        1, ge=0, le=16,
        description="Worker processes (at lower CPU priority) for the extractive compactor; 0 runs it on the event loop.",
    )

    # Artifacts (ArtifactService): bytes kept in the database, content-addressed per app.
    max_artifact_bytes: int = Field(
        64 * 1024 * 1024, ge=1, description="Largest artifact SaveArtifact accepts; RESOURCE_EXHAUSTED past it."
    )
    artifact_quota_bytes_per_app: int = Field(
        0, ge=0,
        description="Artifact bytes an app may store (distinct contents; the same bytes saved again cost nothing); "
        "0: unlimited.",
    )

    # Where artifact bytes live: the database (default) or an S3-compatible
    # object store. Metadata and versions stay in the database either way.
    artifact_store_url: str | None = Field(
        None, pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?$",
        description="s3://bucket/prefix: new artifact bytes go to this S3-compatible bucket under the prefix. "
        "Empty: in the database. Contents saved before a change stay readable where they are.",
    )
    artifact_s3_endpoint_url: str | None = Field(
        None, description="The S3-compatible endpoint (http(s)://host:port); empty: AWS S3 of artifact_s3_region."
    )
    artifact_s3_region: str = Field("us-east-1", min_length=1, description="The bucket's region.")
    artifact_s3_access_key_id: SecretStr | None = Field(
        None, description="Access key id; empty: the AWS SDK's default chain (environment, profile, instance role)."
    )
    artifact_s3_secret_access_key: SecretStr | None = Field(None, description="Secret key going with the access key id.")
    artifact_s3_part_bytes: int = Field(
        8 * 1024 * 1024, ge=5 * 1024 * 1024, le=512 * 1024 * 1024,
        description="Multipart upload part size: a save holds about two parts at once.",
    )
    artifact_s3_timeout_s: float = Field(30.0, gt=0, description="Connect and read timeout of one S3 request.")
    artifact_upload_grace_s: float = Field(
        3600.0, ge=0,
        description="An artifact upload not committed this long after it started is a crashed process's: its staged "
        "bytes (database rows or object-store object and multipart parts) are deleted.",
    )
    artifact_scrub_interval_s: float = Field(
        86400.0, ge=0,
        description="How often each replica scrubs the artifact bytes against the database (the first pass at a "
        "random point of the first interval): unnamed bytes older than artifact_scrub_grace_s are deleted, named "
        "bytes the store lacks are logged. 0: never (agentctx artifacts scrub runs it by hand).",
    )
    artifact_scrub_grace_s: float = Field(
        86400.0, ge=0,
        description="Object-store objects and uploads younger than this are never deleted by the scrub, named or not.",
    )

    # Memory (MemoryService): semantic ranking on top of the lexical one.
    memory_embedding_model: str = Field(
        "", max_length=128,
        description="Embedding model for semantic memory (e.g. local-sim-embed, gemini-embedding-001, "
        "text-embedding-3-small), called through the cache service's Embed. Empty: lexical search only.",
    )
    memory_embedding_provider: str = Field(
        "", max_length=64, description="The cache service's provider instance for it; empty: routed by model.")
    memory_embedding_dimensions: int = Field(
        0, ge=0, le=8192, description="Output dimensions for models that can shorten vectors; 0: the model's own.")
    memory_embedding_timeout_s: float = Field(
        5.0, gt=0, description="Longest wait for one embedding call; past it a search ranks lexically.")

    # Sessions and events: input limits. A violation is INVALID_ARGUMENT
    # naming the field.
    max_event_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="Largest event AppendEvent accepts (encoded).")
    max_parts_per_event: int = Field(256, ge=1, description="Most parts in one event's content.")
    max_state_bytes: int = Field(1024 * 1024, ge=2, description="Largest session state (encoded).")
    max_json_depth: int = Field(
        DEFAULT_MAX_JSON_DEPTH, ge=1, le=MAX_JSON_DEPTH_CEILING,
        description="Deepest nesting of objects and arrays in tool args, tool results, custom metadata and session "
        "state (at every entry point: AppendEvent, BuildContext input and memory, Generate input, sessions' state). "
        f"At most {MAX_JSON_DEPTH_CEILING}: every internal message path carries that.",
    )
    # "-" (the list wildcard), "." and ".." are never ids, whatever the patterns allow.
    id_pattern: str = Field(
        r"[A-Za-z0-9._:-]{1,128}", description="Regex session and event ids must match; never '-', '.' or '..'."
    )
    owner_id_pattern: str = Field(
        r"[A-Za-z0-9._:@+-]{1,128}", description="Regex app and user ids must match; never '-', '.' or '..'."
    )
    default_session_page_size: int = Field(50, ge=1, description="ListSessions page size when none is asked.")
    default_event_page_size: int = Field(100, ge=1, description="ListEvents page size when none is asked.")
    max_page_size: int = Field(1000, ge=1, description="Largest page size a request may ask for.")
    max_event_clock_skew_s: float = Field(86400.0, ge=0, description="How far ahead a client-set event time may be.")
    session_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Server-wide context config defaults, the JSON form of ContextConfig "
        "(model, selection, compaction, cache); a session's own config overrides them.",
    )

    # Session storage.
    sqlite_synchronous: Literal["FULL", "EXTRA", "NORMAL"] = Field(
        "FULL", description="SQLite synchronous mode; FULL: an append is on disk when the RPC returns."
    )
    sqlite_busy_timeout_ms: int = Field(5000, ge=0, description="How long SQLite waits for another process's lock.")
    db_pool_size: int = Field(10, ge=1, le=200, description="Database connections kept open.")
    db_create_if_empty: bool = Field(
        True, description="Create the schema in a brand-new embedded SQLite database at start (never PostgreSQL)."
    )
    append_batch_max: int = Field(256, ge=1, le=10000, description="Most appends committed in one transaction.")
    max_turn_inputs: int = Field(
        256, ge=1, le=10000,
        description="Most input events one Generate or StreamGenerate turn takes (stored in one transaction); "
        "more is INVALID_ARGUMENT on input.",
    )

    # Authorization: which apps each caller may use ("*" = every app).
    app_grants: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Client certificate identity (URI or DNS SAN) -> apps it may use; needs require_client_cert.",
    )
    bearer_tokens: list[BearerToken] = Field(
        default_factory=list, description="Bearer tokens (by SHA-256) for callers without client certificates."
    )
    dev_anonymous_apps: list[str] = Field(
        default_factory=list,
        description="Apps callers without an identity may use; loopback hosts only (development and tests).",
    )

    # Tool tokens (ToolContextService; domain/tool_tokens.py).
    tool_token_keys: list[ToolTokenKey] = Field(
        default_factory=list, description="Tool token signing keys shared by the context replicas ({id, secret}); "
        "unset: one random key per process (tokens verify on that replica only). A key removed from the set "
        "makes its tokens worthless.",
    )
    active_tool_token_key_id: str | None = Field(None, description="The key of tool_token_keys new tokens are "
                                                 "signed with (the only key when unset and there is one).")
    tool_token_ttl_s: float = Field(
        600.0, ge=1.0, le=86400.0, description="How long a tool token is accepted after its mint; a call whose "
        "response is not appended by then has its staged effects dropped.",
    )

    @model_validator(mode="after")
    def _check_tool_keys(self) -> ContextSettings:
        ids = [k.id for k in self.tool_token_keys]
        if len(set(ids)) != len(ids):
            raise ValueError("tool_token_keys: key ids must be unique")
        if self.active_tool_token_key_id is not None and self.active_tool_token_key_id not in ids:
            raise ValueError("active_tool_token_key_id must name a key of tool_token_keys")
        if self.tool_token_keys and self.active_tool_token_key_id is None and len(ids) > 1:
            raise ValueError("active_tool_token_key_id is required with several tool_token_keys")
        return self

    @model_validator(mode="after")
    def _check_sessions(self) -> ContextSettings:
        for name in ("id_pattern", "owner_id_pattern"):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(f"{name} is not a valid regular expression: {exc}") from None
        if max(self.default_session_page_size, self.default_event_page_size) > self.max_page_size:
            raise ValueError("default page sizes must not exceed max_page_size")
        try:
            config_from_defaults(self.session_defaults)
        except ValueError as exc:
            raise ValueError(f"session_defaults: {exc}") from None
        for identity, apps in self.app_grants.items():
            if not apps:
                raise ValueError(f"app_grants[{identity!r}] is empty; remove it or name apps ('*' = all)")
        if self.app_grants and not self.require_client_cert:
            raise ValueError(
                "app_grants name certificate identities but require_client_cert is false: gRPC Python cannot ask "
                "for an optional client certificate, so no caller would have one; set require_client_cert = true "
                "(bearer-token callers then present a certificate too) or use bearer_tokens"
            )
        cache_files = (self.cache_ca, self.cache_cert, self.cache_key)
        if any(f is not None for f in cache_files) and None in cache_files:
            raise ValueError("cache_ca, cache_cert and cache_key go together: set all three, or none "
                             "(Generate then answers FAILED_PRECONDITION)")
        keys = (self.artifact_s3_access_key_id, self.artifact_s3_secret_access_key)
        if (keys[0] is None) != (keys[1] is None):
            raise ValueError("artifact_s3_access_key_id and artifact_s3_secret_access_key go together: set both, or "
                             "neither (the AWS SDK's default credential chain)")
        if self.dev_anonymous_apps and not _is_loopback(self.host):
            raise ValueError("dev_anonymous_apps is allowed only on a loopback host (development and tests)")
        return self

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'context.db').resolve()}"
