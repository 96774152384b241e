"""Settings shared by both services, loaded with pydantic-settings.

Sources, highest priority first: explicit arguments, environment variables
(``AGENTCTX_CONTEXT_*`` / ``AGENTCTX_CACHE_*``, nested with ``__``), the
service's table in a TOML config file (``[context]`` / ``[cache]``), then the
defaults. Invalid values fail at start with a ConfigError naming each field.
"""

from __future__ import annotations

import contextvars
import ipaddress
import pathlib
import tomllib
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agentctx_common.errors import ConfigError

S = TypeVar("S", bound="ServerSettings")

# The config file table being loaded; a context variable keeps it out of
# class state so concurrent loads of different files do not mix.
_file_table: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar(
    "agentctx_file_table", default={}  # noqa: B039 - read only; each load sets its own table
)


class _TomlTableSource(PydanticBaseSettingsSource):
    """One table of a TOML file as a settings source."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class ServerSettings(BaseSettings):
    """Listening, TLS, limits, logging and telemetry of one gRPC server."""

    model_config = SettingsConfigDict(env_nested_delimiter="__", extra="forbid", validate_default=True)
    # The TOML table this service reads; set by subclasses.
    config_table: ClassVar[str] = ""

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(0, ge=0, le=65535, description="Port to listen on; 0 picks a free one.")
    tls_cert: pathlib.Path | None = Field(None, description="Server certificate (PEM).")
    tls_key: pathlib.Path | None = Field(None, description="Server private key (PEM).")
    tls_client_ca: pathlib.Path | None = Field(None, description="CA that signs client certificates.")
    require_client_cert: bool = Field(False, description="Refuse clients without a verified certificate.")
    dev_plaintext: bool = Field(False, description="Serve without TLS. Allowed only on loopback.")
    max_message_bytes: int = Field(32 * 1024 * 1024, ge=1024, description="Max gRPC message size.")
    keepalive_time_s: float = Field(30.0, gt=0, description="Keepalive ping interval.")
    keepalive_timeout_s: float = Field(10.0, gt=0, description="Keepalive ping timeout.")
    shutdown_grace_s: float = Field(5.0, ge=0, description="Time to drain RPCs on shutdown.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    telemetry_exporter: Literal["none", "console"] = Field(
        "none", description="Where spans and metrics go."
    )

    # Admission control (agentctx_common.admission). Over a bound a call gets
    # RESOURCE_EXHAUSTED (SERVER_OVERLOADED) with RetryInfo at once. The
    # defaults suit a small machine (2 cores, a few GB); bench.memory measures
    # RSS under 200 concurrent 8 MiB appends.
    max_inflight_rpcs: int = Field(
        32, ge=1, description="RPCs served at once (health and reflection not counted); gRPC reads at most this many requests."
    )
    max_inflight_request_bytes: int = Field(
        64 * 1024 * 1024, ge=1024,
        description="Encoded request bytes held by RPCs being served; one larger request is admitted alone.",
    )
    overload_retry_after_s: float = Field(0.5, gt=0, description="RetryInfo delay sent with SERVER_OVERLOADED.")
    min_deadline_remaining_s: float = Field(
        0.005, ge=0, description="A call with less time left than this is not started (DEADLINE_TOO_SHORT)."
    )
    malloc_trim_after_bytes: int = Field(
        64 * 1024 * 1024, ge=0,
        description="Return free heap to the system once this many request bytes were released (0: never).",
    )
    max_unrequested_time_s: int = Field(
        3600, ge=1,
        description="How long a call may wait for the server to take it up before gRPC cancels it (its default, 30 s, "
        "gave bare CANCELLED under load).",
    )

    @model_validator(mode="after")
    def _check_transport(self) -> ServerSettings:
        if self.dev_plaintext:
            if not _is_loopback(self.host):
                raise ValueError(f"dev_plaintext is allowed only on a loopback host, not {self.host!r}")
        elif self.tls_cert is None or self.tls_key is None:
            raise ValueError("tls_cert and tls_key are required unless dev_plaintext is set")
        if self.require_client_cert and self.tls_client_ca is None:
            raise ValueError("require_client_cert needs tls_client_ca")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlTableSource(settings_cls, _file_table.get()))

    @classmethod
    def load(cls: type[S], config_file: pathlib.Path | str | None = None, **overrides: Any) -> S:
        """Settings from overrides, environment and ``config_file``.

        Raises ConfigError with one line per invalid field.
        """
        table: dict[str, Any] = {}
        if config_file is not None:
            path = pathlib.Path(config_file)
            try:
                document = tomllib.loads(path.read_text())
            except FileNotFoundError:
                raise ConfigError(f"config file not found: {path}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
            table = document.get(cls.config_table, {})
            if not isinstance(table, dict):
                raise ConfigError(f"config file {path}: [{cls.config_table}] must be a table")
        token = _file_table.set(table)
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, cls)) from None
        finally:
            _file_table.reset(token)


def describe_validation_error(exc: ValidationError, cls: type[BaseSettings]) -> str:
    prefix = cls.model_config.get("env_prefix", "")
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        hint = f" (env {prefix}{field.upper().replace('.', '__')})" if err["loc"] else ""
        problems.append(f"{field}{hint}: {err['msg'].removeprefix('Value error, ')}")
    return f"invalid {cls.__name__} configuration: " + "; ".join(problems)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
