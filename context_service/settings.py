"""Context service settings: ``AGENTCTX_CONTEXT_*`` environment variables or
the ``[context]`` table of the config file."""

from __future__ import annotations

import pathlib

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from agentctx_common.settings import ServerSettings


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
    cache_target: str = Field("127.0.0.1:50052", description="host:port of the cache service.")
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

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'context.db').resolve()}"
