"""The OTLP exporter settings as operators give them: files checked at
start with a one-line reason, both transports built as collectors expect."""

from __future__ import annotations

import pathlib

import pytest

from agentctx_common.errors import ConfigError
from agentctx_common.settings import ServerSettings
from agentctx_common.telemetry import OtlpConfig, _exporters


def test_grpc_exporters_use_the_endpoint_and_credentials(certs_dir: pathlib.Path) -> None:
    spans, measures, interval = _exporters("otlp", OtlpConfig(
        endpoint="collector.internal:4317", ca=certs_dir / "ca.pem", cert=certs_dir / "context-client.pem",
        key=certs_dir / "context-client.key", metrics_interval_s=15,
    ))
    assert interval == 15
    assert type(spans).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")
    assert type(measures).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")


def test_http_exporters_post_to_the_otlp_paths() -> None:
    spans, measures, _ = _exporters("otlp", OtlpConfig(endpoint="https://collector:4318/", protocol="http/protobuf",
                                                       headers={"authorization": "Bearer t"}))
    assert spans._endpoint == "https://collector:4318/v1/traces"  # type: ignore[attr-defined]
    assert measures._endpoint == "https://collector:4318/v1/metrics"  # type: ignore[attr-defined]


def test_an_unreadable_file_is_one_line_naming_it(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match=r"otlp_ca .*missing.pem: cannot be read"):
        _exporters("otlp", OtlpConfig(ca=tmp_path / "missing.pem"))


def test_a_client_certificate_needs_its_key(certs_dir: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="otlp_cert and otlp_key go together"):
        _exporters("otlp", OtlpConfig(cert=certs_dir / "context-client.pem"))


def test_settings_carry_the_otlp_configuration() -> None:
    settings = ServerSettings(dev_plaintext=True, telemetry_exporter="otlp", otlp_endpoint="127.0.0.1:9",
                              otlp_insecure=True, otlp_headers={"x-tenant": "a"}, metrics_export_interval_s=2)
    config = settings.otlp_config()
    assert (config.endpoint, config.insecure, dict(config.headers), config.metrics_interval_s) == (
        "127.0.0.1:9", True, {"x-tenant": "a"}, 2
    )
