"""What a provider's folder gives the registry (providers.registry): its
route model, its built-in model patterns, whether its own instance is
configured, and how to build an instance. See docs/ARCHITECTURE.md, "Add a
provider".

The registry and the folders never import ``cache_service.settings`` (it
imports them): a plugin reads its own settings mixin, which CacheSettings
inherits, and the shared ``BuildEnv``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from cache_service.cluster.client import RedisClient
from cache_service.domain.ports import Clock, Provider


class ProviderRoute(BaseModel):
    """One row of the ``routes`` table. Each provider's route model narrows
    ``provider`` to its kinds (the table is a union discriminated on it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str = Field(min_length=1, description="Model name pattern (shell style: claude-*, gpt-4?-*).")
    provider: str = Field(description="The adapter that serves it.")
    name: str | None = Field(None, min_length=1, max_length=64,
                             description="Instance name (default: the provider kind), e.g. vllm.")
    base_url: str | None = Field(None, description="The instance's endpoint (OpenAI-compatible servers, proxies).")
    api_key_env: str | None = Field(None, description="Environment variable holding the instance's key.")
    api_key: SecretStr | None = Field(None, description="Filled from api_key_env; never set in a file.")
    # Accepted on every route (as always); the OpenAI-compatible adapter reads them.
    send_cache_key: bool = Field(True, description="OpenAI-compatible: send prompt_cache_key.")
    prompt_cache_retention: Literal["in_memory", "24h"] | None = Field(
        None, description="OpenAI: prompt_cache_retention to ask for.")
    min_cache_tokens: int | None = Field(None, ge=0, description="Override of the instance's minimum prefix.")

    @property
    def instance(self) -> str:
        return self.name or self.provider


@dataclass(frozen=True)
class BuildEnv:
    """What every instance may need besides its own settings."""

    clock: Clock
    request_timeout_s: float
    bytes_per_token: float
    redis: RedisClient | None = None  # the cluster's client, for a simulator with shared state


class ProviderPlugin:
    """One provider. ``kinds`` are the route ``provider`` values it serves;
    ``patterns`` the built-in routes of its own instances, routed once
    configured; ``always_routes`` those routed whatever is configured."""

    kinds: tuple[str, ...] = ()
    route: type[ProviderRoute] = ProviderRoute
    patterns: Mapping[str, tuple[str, ...]] = {}
    always_routes: tuple[tuple[str, str], ...] = ()
    # Whether an instance named after its first kind is built from settings alone, once configured.
    has_own_instance = False
    # What default_provider may name of it (accepted values, unchanged since they were a Literal).
    defaults: tuple[str, ...] = ()
    # (field, the SDK's variable): the key's field is read from the SDK's own
    # variable when ours (AGENTCTX_CACHE_<FIELD>) is unset.
    key_fallback: tuple[str, str] | None = None
    # Why its own instance cannot be built (ends "... is configured").
    unconfigured = "no credentials are configured"
    # Whether its instance takes any model name (a vendor's API), or only its own (the simulator).
    serves_any_model = True

    def hint(self, settings: Any) -> str:
        """What to configure so that its own instance serves its patterns."""
        if self.key_fallback is None:
            return f"{self.unconfigured}; add a route for it"
        field, theirs = self.key_fallback
        ours = f"AGENTCTX_CACHE_{field.upper()}"
        if getattr(settings, field, None) is not None:
            return (f"the key in {ours} or {theirs} holds characters no API key has (a placeholder such as "
                    f"'\u2026'?): set the real key in the cache service's environment")
        return f"{self.unconfigured}: set {theirs} (or {ours}) in the cache service's environment"

    def configured(self, settings: Any) -> bool:
        """Whether its own instance (not a named route's) can be built from
        the settings alone. A provider without settings of its own is
        always (its routes carry what it needs)."""
        return True

    def own_instances(self, settings: Any) -> tuple[str, ...]:
        """The instances built without a route."""
        return self.kinds[:1] if self.has_own_instance and self.configured(settings) else ()

    def build(self, settings: Any, route: ProviderRoute | None, name: str, kind: str, env: BuildEnv) -> Provider:
        """The instance ``name`` of ``kind``: its own (``route`` None) or a route's."""
        raise NotImplementedError


def usable_key(value: SecretStr | None) -> bool:
    """A key an HTTP header can carry: printable ASCII without spaces (not
    a placeholder such as the README's '\u2026')."""
    if value is None:
        return False
    key = value.get_secret_value()
    return bool(key) and all("!" <= ch <= "~" for ch in key)


def secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None

