"""Cache service settings: ``AGENTCTX_CACHE_*`` environment variables or the
``[cache]`` table of the config file. The service accepts mTLS only, and
answers only callers whose certificate carries one of ``allowed_identities``
(by default the context service's): the cache service's RPCs and reflection.
``grpc.health.v1.Health`` is open to any certificate of the client CA, for
probes; it tells only whether the service is serving.

Provider credentials live here and nowhere else in the system: the Gemini
API key is read from ``AGENTCTX_CACHE_GEMINI_API_KEY`` (or, when that is
unset, the conventional ``GEMINI_API_KEY``) and is a SecretStr, so it never
appears in a repr, a log line or a validation error. So are the Anthropic
and OpenAI keys (``AGENTCTX_CACHE_ANTHROPIC_API_KEY`` else
``ANTHROPIC_API_KEY``; ``AGENTCTX_CACHE_OPENAI_API_KEY`` else
``OPENAI_API_KEY``) and each route's key (the variable its ``api_key_env``
names). ``routes`` picks the provider of each model
(cache_service.providers.routes). Each provider owns its fields (the
``gemini_*``, ``anthropic_*``, ``openai_*`` and ``local_*`` ones, inherited
through providers.registry.ProviderFields) and its route model; the
registry answers which providers exist and which are configured.
"""

from __future__ import annotations

import base64
import binascii
import os
import pathlib
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from agentctx_common.certs import CONTEXT_SERVICE_ID
from agentctx_common.settings import ServerSettings
from cache_service.providers.plugin import ProviderRoute
from cache_service.providers.registry import BY_KIND, DEFAULTS, PROVIDERS, ProviderFields, RouteEntry

MiB = 1024 * 1024


class LeaseKey(BaseModel):
    """One lease signing key of the key set replicas share."""

    id: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")
    secret: SecretStr = Field(description="At least 32 bytes of randomness (any text; used as HMAC key).")


class CacheSettings(ServerSettings, ProviderFields):
    model_config = SettingsConfigDict(env_prefix="AGENTCTX_CACHE_")
    config_table = "cache"

    port: int = Field(50052, ge=0, le=65535)
    # Above the context service's bound: each of its turns holds at most one call here at a time.
    max_inflight_rpcs: int = Field(128, ge=1, description="RPCs served at once (health and reflection not counted).")
    data_dir: pathlib.Path = Field(pathlib.Path(".agentctx/data"), description="Where the cache journal lives.")
    require_client_cert: bool = True
    allowed_identities: list[str] = Field(
        default_factory=lambda: [CONTEXT_SERVICE_ID],
        description="Client certificate identities (URI or DNS SANs) allowed to call the service.",
    )

    # --- providers (each provider's own fields, gemini_* and the like, come from
    # ProviderFields: cache_service/providers/<name>/settings.py) ----------------
    default_provider: str = Field("local", description=f"Provider of a scope that names none ({', '.join(DEFAULTS)}).")
    request_timeout_s: float = Field(60.0, gt=0, description="Upper bound of one provider model call.")
    bytes_per_token: float = Field(4.0, gt=0, description="Token estimate: canonical UTF-8 bytes per token.")
    # --- registry bounds ------------------------------------------------------
    failure_mode: Literal["bypass", "error"] = Field(
        "bypass", description="On a cache failure: call uncached (bypass) or fail the call (error)."
    )
    min_prefix_tokens: int = Field(
        1024, ge=0, description="Prefixes below this many estimated tokens bypass without a provider call."
    )
    default_ttl_s: float = Field(300.0, gt=0, description="The base TTL a cache gets when the caller sets none "
        "(the policy may choose 2x, 4x or 12x it from the observed gaps, within max_ttl_s, or on Gemini a fifth "
        "of it, if at least 60 s, for calls that come well within that).")
    max_ttl_s: float = Field(3600.0, gt=0, description="Cap on a caller's TTL.")
    max_entries: int = Field(256, ge=1, description="Live caches across all scopes; the least recently used idle one is evicted.")
    max_prefix_bytes: int = Field(4 * MiB, ge=1, description="Largest prefix (canonical bytes) the registry caches.")
    max_scope_bytes: int = Field(16 * 1024, ge=64, description="Largest scope (canonical bytes).")
    max_waiters: int = Field(128, ge=1, description="Callers that may wait on one in-flight create.")
    max_sightings: int = Field(4096, ge=1, description="Recorded prefix sightings (for the create policy) kept in memory.")
    create_timeout_s: float = Field(5.0, gt=0, description="Deadline of one provider cache create.")
    delete_timeout_s: float = Field(2.0, gt=0, description="Deadline of one provider cache delete.")
    cleanup_workers: int = Field(4, ge=1, description="Workers that delete expired, evicted and orphaned caches.")
    cleanup_attempts: int = Field(3, ge=1, description="Attempts per delete before it is left to the next start.")
    lease_ttl_s: float = Field(120.0, gt=0, description="A lease is valid at most this long (and never past its cache).")
    expiry_margin_s: float = Field(2.0, ge=0, description="A cache this close to expiry is not leased.")
    sweep_interval_s: float = Field(1.0, gt=0, description="How often expired caches and leases are swept.")

    # --- create policy (see cache_service/domain/policy.py) ---------------------
    sightings_before_create: int = Field(
        1, ge=0, description="0: create without evidence of reuse (the cost test still applies); otherwise a prefix "
        "is cached only once a request it extends was seen within the TTL and the expected reads repay the cache."
    )
    grow_share: float = Field(
        0.25, gt=0, description="Grow a cache only when the uncached part of the prefix exceeds this share of the "
        "cached part (and the expected reads repay the grown cache)."
    )
    first_sighting_prior: float = Field(
        0.5, ge=0, le=1, description="Marked caches (Anthropic): the prior chance that a prefix seen for the first "
        "time is followed by a request repeating it within the TTL (agents loop); the observed rate overrides it. "
        "Above 0.28 a fresh scope's first request writes a 5-minute breakpoint.",
    )
    first_sighting_prior_named: float = Field(
        0.0, ge=0, le=1, description="The same prior for named caches (Gemini): 0, as ADK, so only observed "
        "outcomes make a create at first sight (domain.policy, rule 7).",
    )
    first_sighting_prior_weight: float = Field(
        0.5, ge=0, description="How many observed first-sighting outcomes the prior is worth (0: never write at "
        "first sight).",
    )
    first_sighting_prior_weight_named: float = Field(
        4.0, ge=0, description="The same for named caches: a create at first sight needs several observed "
        "outcomes (0: never).",
    )
    loss_allowance_tokens: float = Field(
        4096.0, ge=0, description="The credit a scope's loss account opens with, in input-token equivalents "
        "(domain.policy, rule 8): no cache write is made while the account is in deficit, so a scope's calls "
        "never cost more than uncached by more than this, one write's premium and loss_tolerance of their input.",
    )
    loss_tolerance: float = Field(
        0.02, ge=0, description="The share of each call's input a scope's account gains (domain.policy, rule 8).",
    )
    loss_account_keep_s: float = Field(
        86400.0, gt=0, description="How long a scope's loss account is kept after its last booking (at least "
        "max_ttl_s); then the scope opens afresh at loss_allowance_tokens. In Redis with redis_url.",
    )
    learned_floor_keep_s: float = Field(
        86400.0, gt=0, description="How long a model's floor learned from the provider (a Gemini create refused "
        "as too small, an Anthropic call whose breakpoints wrote and read nothing) is kept after it was last "
        "taught; a prefix the provider cached below it lowers it at once. In Redis with redis_url.",
    )
    refresh_on_hit: bool = Field(True, description="Extend a hit cache's TTL when less than half of it is left.")
    grow_in_background: bool = Field(
        False, description="Grow a cache without making the call wait for the provider's create: the call "
        "uses the cache it has, later calls the grown one (faster turns, slightly fewer cached tokens).",
    )
    create_policy: Literal["agentctx", "adk"] = Field(
        "agentctx", description="agentctx (cost-aware), or adk: adk-python 2.13's policy, for comparisons "
        "(never grow a valid cache; re-create it after adk_cache_intervals invocations).",
    )
    adk_cache_intervals: int = Field(10, ge=1, le=100, description="adk policy: invocations a cache serves "
        "before it is re-created.")
    shared_head_apps: list[str] = Field(
        default_factory=list, description="Apps whose users share head-only caches on providers with named caches "
        "(Gemini), under create_policy agentctx: a cache of the model, system instruction, tools and tool config alone, with no history, is "
        "created in and found from the app-wide scope (the scope without its user), so one user's first call "
        "reads the head another user's call cached; conversation caches stay per user. A side channel: a user "
        "whose call hits (or is billed cached for) a head learns that another user of the app sent that exact "
        "head lately, so could confirm a guess of another user's templated system instruction; opt in only apps "
        "whose heads carry nothing of a user. Invalidating a user's scope of such an app drops the app's shared "
        "head caches too (docs/ARCHITECTURE.md, \"Shared heads\").",
    )
    content_memo_bytes: int = Field(
        64 * MiB, ge=0, description="Memory for contents already converted and hashed, so a turn hashes only "
        "its new contents (least recently used dropped first; 0: off).",
    )

    # --- the cache tier on Redis (see cache_service/redis/) -------------------
    redis_url: SecretStr | None = Field(
        None, description="Redis shared by the cache replicas (registry, single flight, journal): redis://host:port/db, "
        "redis+sentinel://host:port[,host:port...]/service or redis+cluster://host:port[,host:port...]; "
        "unset: this process alone (in-memory registry, local journal).",
    )
    redis_key_prefix: str = Field("agentctx:", min_length=1, max_length=64,
                                  description="Prefix of every key the service writes to Redis.")
    redis_encryption_key: SecretStr | None = Field(
        None, description="AES-256-GCM key (32 bytes, base64) for provider resource names stored in Redis.",
    )
    lease_keys: list[LeaseKey] = Field(
        default_factory=list, description="Lease signing keys shared by the replicas ({id, secret}); keeping "
        "retired keys in the set keeps their leases valid across a rotation.",
    )
    active_lease_key_id: str | None = Field(None, description="The key of lease_keys new leases are signed with.")
    replica_heartbeat_s: float = Field(2.0, gt=0, description="How often a replica renews its ownership in Redis.")
    replica_dead_after_s: float = Field(
        6.0, gt=0, description="A replica whose heartbeat is this old is dead: its caches are adopted or deleted.",
    )
    tier_sweep_interval_s: float = Field(2.0, gt=0, description="How often dead replicas are looked for.")
    registry_timeout_s: float = Field(
        5.0, gt=0, description="Deadline of one Redis step of the registry (the wait for a pooled connection "
        "included); past it the turn goes uncached (failure_mode bypass) or fails UNAVAILABLE "
        "REGISTRY_UNAVAILABLE (error), and after a connection error, or when no step succeeded for this long, "
        "every step does so at once until Redis answers again.",
    )
    registry_retry_s: float = Field(
        1.0, gt=0, description="After Redis failed, how long steps fail at once before one tries it again.",
    )
    flight_claim_s: float = Field(
        2.0, gt=0, description="Lease of a replica's claim on a create, renewed every third of it while the "
        "create runs: a replica killed mid-create holds the key no longer than this.",
    )

    # --- routing by model (cache_service/providers/routes.py) --------------------
    routes: list[RouteEntry] = Field(
        default_factory=list,
        description="Model patterns to providers, first match wins, e.g. "
        '[{pattern = "claude-*", provider = "anthropic"}, {pattern = "qwen*", provider = "openai", '
        'name = "vllm", base_url = "http://127.0.0.1:8000/v1"}].',
    )

    @model_validator(mode="before")
    @classmethod
    def _key_fallbacks(cls, values: object) -> object:
        # The SDKs' own conventions, used only when our variables are unset.
        if not isinstance(values, dict):
            return values
        for field, theirs in (p.key_fallback for p in PROVIDERS if p.key_fallback is not None):
            ours = f"{cls.model_config['env_prefix']}{field}".upper()
            if values.get(field) is None and ours not in os.environ and os.environ.get(theirs):
                values = {**values, field: os.environ[theirs]}
        return values

    @field_validator("default_provider")
    @classmethod
    def _a_default(cls, value: str) -> str:
        if value not in DEFAULTS:
            raise ValueError(f"must be one of {', '.join(DEFAULTS)}")
        return value

    @model_validator(mode="after")
    def _mtls_only(self) -> CacheSettings:
        if self.dev_plaintext:
            raise ValueError("the cache service serves mTLS only; dev_plaintext is not allowed")
        if not self.require_client_cert or self.tls_client_ca is None:
            raise ValueError("the cache service requires client certificates: set tls_client_ca")
        if not self.allowed_identities:
            raise ValueError("allowed_identities is empty: no caller could use the service")
        if self.default_ttl_s > self.max_ttl_s:
            raise ValueError("default_ttl_s must not exceed max_ttl_s")
        if not self.vendor_configured(self.default_provider):
            raise ValueError(f"default_provider is {self.default_provider} but "
                             f"{BY_KIND[self.default_provider].hint(self)}")
        self._check_cluster()
        return self

    def _check_cluster(self) -> None:
        ids = [k.id for k in self.lease_keys]
        if len(set(ids)) != len(ids):
            raise ValueError("lease_keys: key ids must be unique")
        if any(len(k.secret.get_secret_value().encode()) < 32 for k in self.lease_keys):
            raise ValueError("lease_keys: every secret must be at least 32 bytes")
        if self.lease_keys and self.active_lease_key_id not in ids:
            raise ValueError("active_lease_key_id must name one of lease_keys")
        if self.lease_keys == [] and self.active_lease_key_id is not None:
            raise ValueError("active_lease_key_id is set but lease_keys is empty")
        if self.local_shared_state and self.redis_url is None:
            raise ValueError("local_shared_state needs redis_url")
        if self.redis_url is None:
            return
        if "{" in self.redis_key_prefix or "}" in self.redis_key_prefix:
            raise ValueError("redis_key_prefix must not hold '{' or '}': the keys' hash tags follow it")
        url = self.redis_url.get_secret_value()
        if url.startswith(("redis+cluster://", "redis+sentinel://")):
            from cache_service.cluster.client import parse

            parse(url)  # a ValueError that names what is wrong, never the URL
        if self.redis_encryption_key is None:
            raise ValueError("redis_url is set but redis_encryption_key is not: resource names would be stored in clear")
        if not encryption_key_ok(self.redis_encryption_key):
            raise ValueError("redis_encryption_key must be 32 bytes, base64-encoded")
        if not self.lease_keys:
            raise ValueError("redis_url is set but lease_keys is not: leases would be valid on one replica only")
        if self.replica_dead_after_s <= self.replica_heartbeat_s:
            raise ValueError("replica_dead_after_s must exceed replica_heartbeat_s")

    @model_validator(mode="after")
    def _routes_resolve(self) -> CacheSettings:
        resolved = []
        instances: dict[str, ProviderRoute] = {}
        for route in self.routes:
            if route.api_key is not None:
                raise ValueError(f"route {route.pattern!r}: keys never go in the table; set api_key_env")
            if route.api_key_env is not None:
                value = os.environ.get(route.api_key_env)
                if not value:
                    raise ValueError(f"route {route.pattern!r}: environment variable {route.api_key_env} is unset")
                route = route.model_copy(update={"api_key": SecretStr(value)})
            first = instances.setdefault(route.instance, route)
            if (first.provider, first.base_url, first.api_key_env) != (route.provider, route.base_url,
                                                                       route.api_key_env):
                raise ValueError(f"routes name instance {route.instance!r} with different providers or endpoints")
            if route.name is None and not self.vendor_configured(route.provider):
                raise ValueError(f"route {route.pattern!r}: provider {route.provider} has no credentials configured")
            resolved.append(route)
        # Assigned without validation: the routes are already valid.
        object.__setattr__(self, "routes", resolved)
        return self

    def vendor_configured(self, kind: str) -> bool:
        """Whether the vendor's own instance (not a named route's) can be built."""
        plugin = BY_KIND.get(kind)
        return plugin is None or plugin.configured(self)

def encryption_key_ok(key: SecretStr) -> bool:
    try:
        return len(base64.b64decode(key.get_secret_value(), validate=True)) == 32
    except (ValueError, binascii.Error):
        return False
