"""Settings shared by both services, loaded with pydantic-settings.

Sources, highest priority first: explicit arguments, environment variables
(``AGENTCTX_CONTEXT_*`` / ``AGENTCTX_CACHE_*``, nested with ``__``), the
service's table in a TOML config file (``[context]`` / ``[cache]``), then the
defaults. Invalid values fail at start with a ConfigError naming each field
(and its variable: a complex value that is not JSON names the variable, never
its value). A variable with the service's prefix that names no setting (a
misspelling) is logged as a warning and ignored; a key of the file's table
that names no setting stops the start, naming the file and the nearest key.
"""

from __future__ import annotations

import contextvars
import difflib
import ipaddress
import json
import logging
import os
import pathlib
import tomllib
from typing import Any, ClassVar, Literal, TypeVar, get_origin

from pydantic import Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from agentctx_common.errors import ConfigError
from agentctx_common.telemetry import OtlpConfig

S = TypeVar("S", bound="ServerSettings")
log = logging.getLogger("agentctx.settings")

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


class _EnvSource(EnvSettingsSource):
    """The environment, with a complex value that does not decode as a
    ConfigError naming the variable (pydantic-settings raises a SettingsError
    that prints as a traceback)."""

    def prepare_field_value(self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool) -> Any:
        try:
            return super().prepare_field_value(field_name, field, value, value_is_complex)
        except ValueError as exc:
            variable = f"{self.env_prefix}{field_name}".upper()
            why = f": {exc.msg}" if isinstance(exc, json.JSONDecodeError) else ""
            raise ConfigError(
                f"environment variable {variable} (or {variable}__*) is not valid JSON{why}; "
                f"{field_name} takes a JSON {_json_kind(field)}"
            ) from None


def _json_kind(field: FieldInfo) -> str:
    origin = get_origin(field.annotation) or field.annotation
    return "object" if origin is dict else "array" if origin is list else "value"


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
    require_client_cert: bool = Field(
        False,
        description="Ask every client for a certificate, verify it against tls_client_ca and refuse clients "
        "without one. gRPC Python cannot ask for an optional certificate: when false none is asked for.",
    )
    dev_plaintext: bool = Field(False, description="Serve without TLS. Allowed only on loopback.")
    max_message_bytes: int = Field(32 * 1024 * 1024, ge=1024, description="Max gRPC message size.")
    keepalive_time_s: float = Field(30.0, gt=0, description="Keepalive ping interval.")
    keepalive_timeout_s: float = Field(10.0, gt=0, description="Keepalive ping timeout.")
    shutdown_grace_s: float = Field(5.0, ge=0, description="Time to drain RPCs on shutdown.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    telemetry_exporter: Literal["none", "console", "otlp"] = Field(
        "none", description="Where spans and metrics go: nowhere, stdout, or an OpenTelemetry collector."
    )
    otlp_endpoint: str = Field(
        "127.0.0.1:4317",
        description="The collector: host:port for gRPC, or a base URL (https://host:4318) for HTTP/protobuf.",
    )
    otlp_protocol: Literal["grpc", "http/protobuf"] = Field("grpc", description="OTLP transport.")
    otlp_insecure: bool = Field(False, description="Plaintext gRPC to the collector (a local sidecar).")
    otlp_ca: pathlib.Path | None = Field(None, description="CA of the collector's certificate (PEM).")
    otlp_cert: pathlib.Path | None = Field(None, description="Client certificate for the collector (PEM).")
    otlp_key: pathlib.Path | None = Field(None, description="Client key for the collector (PEM).")
    otlp_headers: dict[str, str] = Field(
        default_factory=dict, description="Headers sent with every export (auth tokens); never logged."
    )
    otlp_timeout_s: float = Field(10.0, gt=0, description="Timeout of one export.")
    metrics_export_interval_s: float = Field(60.0, gt=0, description="How often metrics are exported.")

    def otlp_config(self) -> OtlpConfig:
        return OtlpConfig(
            endpoint=self.otlp_endpoint, protocol=self.otlp_protocol, insecure=self.otlp_insecure,
            ca=self.otlp_ca, cert=self.otlp_cert, key=self.otlp_key, headers=dict(self.otlp_headers),
            timeout_s=self.otlp_timeout_s, metrics_interval_s=self.metrics_export_interval_s,
        )

    # Admission control (agentctx_common.load_shedding). Over a bound a call gets
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
        description=("Return free heap to the system once this many request bytes were released, at idle once"
                     " 1 MiB (or this, if smaller) was, and within 5 s of any release (0: never)."),
    )
    # What the transport may hold before admission sees a request: without
    # these bounds gRPC reads whole messages of every connection (200
    # connections of 8 MiB each peaked at 2 GB whatever the in-flight bound).
    http2_stream_window_bytes: int = Field(
        64 * 1024, ge=16 * 1024,
        description="HTTP/2 flow-control window of one stream: how far gRPC reads a request ahead of the application.",
    )
    http2_bdp_probe: bool = Field(
        False,
        description="Let gRPC grow stream windows by bandwidth-delay probing (faster bulk transfer on long links, "
        "unbounded buffering under many large requests).",
    )
    max_streams_per_connection: int = Field(
        0, ge=0,
        description="Concurrent RPCs one connection may open (HTTP/2 max_concurrent_streams; 0: no bound). gRPC "
        "clients do not queue past it: the streams over it fail UNAVAILABLE instead of SERVER_OVERLOADED.",
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
        if self.tls_client_ca is not None and not self.require_client_cert:
            raise ValueError(
                "tls_client_ca is set but require_client_cert is false: gRPC Python cannot ask for an optional "
                "client certificate, so none would be verified; set require_client_cert = true or remove tls_client_ca"
            )
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
        return (init_settings, _EnvSource(settings_cls), _TomlTableSource(settings_cls, _file_table.get()))

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
            check_file_keys(cls, path, table)
        warn_unknown_environment(cls)
        token = _file_table.set(table)
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, cls)) from None
        finally:
            _file_table.reset(token)


def check_file_keys(cls: type[BaseSettings], path: pathlib.Path, table: dict[str, Any]) -> None:
    """ConfigError naming the file, the table, each key that is not a setting
    of ``cls`` and the nearest valid key (pydantic would say only "Extra
    inputs are not permitted" under the key, with an environment variable
    the user never set)."""
    fields = set(cls.model_fields)
    unknown = sorted(set(table) - fields)
    if not unknown:
        return
    problems = []
    for key in unknown:
        close = difflib.get_close_matches(key, fields, n=1)
        problems.append(f"{key!r} is not a setting" + (f" (did you mean {close[0]!r}?)" if close else ""))
    table_name = str(getattr(cls, "config_table", ""))
    raise ConfigError(f"config file {path}, table [{table_name}]: " + "; ".join(problems))


def warn_unknown_environment(cls: type[BaseSettings]) -> list[str]:
    """Variables with ``cls``'s prefix that name none of its settings, each
    logged as a warning (with the closest setting's variable, if any):
    otherwise a misspelt variable is silently ignored. Names only, never values."""
    prefix = str(cls.model_config.get("env_prefix", "")).upper()
    if not prefix:
        return []
    fields = set(cls.model_fields)
    unknown = []
    for name in sorted(os.environ):
        upper = name.upper()
        if not upper.startswith(prefix):
            continue
        field = upper[len(prefix):].split("__", 1)[0].lower()
        if field in fields:
            continue
        unknown.append(name)
        close = difflib.get_close_matches(field, fields, n=1)
        hint = f"; did you mean {prefix}{close[0].upper()}?" if close else ""
        log.warning(f"environment variable {name} is not a {cls.__name__} setting and is ignored{hint}",
                    extra={"variable": name})
    return unknown


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
