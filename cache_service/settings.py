"""Cache service settings: ``AGENTCTX_CACHE_*`` environment variables or the
``[cache]`` table of the config file. The service accepts mTLS only."""

from __future__ import annotations

import pathlib

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from agentctx_common.certs import CONTEXT_SERVICE_ID
from agentctx_common.settings import ServerSettings


class CacheSettings(ServerSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTCTX_CACHE_")
    config_table = "cache"

    port: int = Field(50052, ge=0, le=65535)
    data_dir: pathlib.Path = Field(pathlib.Path(".agentctx/data"), description="Where the cache journal lives.")
    require_client_cert: bool = True
    allowed_identities: list[str] = Field(
        default_factory=lambda: [CONTEXT_SERVICE_ID],
        description="Client certificate identities (URI or DNS SANs) allowed to call the service.",
    )

    @model_validator(mode="after")
    def _mtls_only(self) -> CacheSettings:
        if self.dev_plaintext:
            raise ValueError("the cache service serves mTLS only; dev_plaintext is not allowed")
        if not self.require_client_cert or self.tls_client_ca is None:
            raise ValueError("the cache service requires client certificates: set tls_client_ca")
        if not self.allowed_identities:
            raise ValueError("allowed_identities is empty: no caller could use the service")
        return self
