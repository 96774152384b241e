"""Settings come from arguments, environment and a TOML file, in that order,
and invalid configuration fails at start with a clear message."""

from __future__ import annotations

import pathlib

import pytest

from agentctx_common.errors import ConfigError
from cache_service.settings import CacheSettings
from context_service.settings import ContextSettings


def _tls(certs: pathlib.Path, stem: str) -> dict[str, object]:
    return {"tls_cert": certs / f"{stem}.pem", "tls_key": certs / f"{stem}.key", "tls_client_ca": certs / "ca.pem"}


def test_environment_overrides_the_config_file(tmp_path, monkeypatch, certs_dir) -> None:
    config = tmp_path / "agentctx.toml"
    config.write_text(
        f'[context]\nport = 6000\ndefault_model = "from-file"\ntls_cert = "{certs_dir}/context-server.pem"\n'
        f'tls_key = "{certs_dir}/context-server.key"\n'
    )
    monkeypatch.setenv("AGENTCTX_CONTEXT_PORT", "6001")
    settings = ContextSettings.load(config)
    assert settings.port == 6001
    assert settings.default_model == "from-file"
    assert ContextSettings.load(config, port=6002).port == 6002


def test_invalid_value_names_the_field_and_its_variable(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTCTX_CONTEXT_PORT", "not-a-port")
    with pytest.raises(ConfigError) as caught:
        ContextSettings.load(dev_plaintext=True)
    message = str(caught.value)
    assert "port" in message and "AGENTCTX_CONTEXT_PORT" in message
    assert "\n" not in message


def test_unknown_config_key_is_rejected(tmp_path, certs_dir) -> None:
    config = tmp_path / "agentctx.toml"
    config.write_text("[context]\ndev_plaintext = true\nprot = 5\n")
    with pytest.raises(ConfigError) as caught:
        ContextSettings.load(config)
    # The file, the table, the key and the nearest valid key; not pydantic's
    # "Extra inputs are not permitted" under a variable nobody set.
    message = str(caught.value)
    assert message == f"config file {config}, table [context]: 'prot' is not a setting (did you mean 'port'?)"
    config.write_text("[cache]\ndefualt_ttl_s = 600\nzzzz = 1\n")
    with pytest.raises(ConfigError) as caught:
        CacheSettings.load(config)
    assert "'defualt_ttl_s' is not a setting (did you mean 'default_ttl_s'?); 'zzzz' is not a setting" in str(caught.value)


def test_malformed_config_file(tmp_path) -> None:
    config = tmp_path / "agentctx.toml"
    config.write_text("[context\nport = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        ContextSettings.load(config)


def test_missing_config_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        ContextSettings.load(tmp_path / "nope.toml")


def test_plaintext_only_on_loopback() -> None:
    assert ContextSettings.load(dev_plaintext=True, host="127.0.0.1").dev_plaintext
    assert ContextSettings.load(dev_plaintext=True, host="::1").dev_plaintext
    with pytest.raises(ConfigError, match="loopback"):
        ContextSettings.load(dev_plaintext=True, host="0.0.0.0")


def test_tls_files_required_without_plaintext() -> None:
    with pytest.raises(ConfigError, match="tls_cert"):
        ContextSettings.load()


def test_cache_service_is_mtls_only(certs_dir) -> None:
    with pytest.raises(ConfigError, match="mTLS only"):
        CacheSettings.load(dev_plaintext=True, tls_client_ca=certs_dir / "ca.pem")
    with pytest.raises(ConfigError, match="tls_client_ca"):
        CacheSettings.load(tls_cert=certs_dir / "cache-server.pem", tls_key=certs_dir / "cache-server.key")
    with pytest.raises(ConfigError, match="allowed_identities"):
        CacheSettings.load(**_tls(certs_dir, "cache-server"), allowed_identities=[])
    assert CacheSettings.load(**_tls(certs_dir, "cache-server")).require_client_cert


def test_missing_certificate_file_is_a_config_error(tmp_path, certs_dir) -> None:
    from agentctx_common.tls import server_credentials

    with pytest.raises(ConfigError, match="not found"):
        server_credentials(tmp_path / "missing.pem", certs_dir / "context-server.key")
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello")
    with pytest.raises(ConfigError, match="not PEM"):
        server_credentials(not_pem, certs_dir / "context-server.key")


def test_certificate_settings_that_would_be_ignored_are_refused(certs_dir) -> None:
    """gRPC Python asks for a client certificate only when it requires one:
    with require_client_cert false a granted certificate was silently
    ignored (UNAUTHENTICATED). Such configurations fail at start instead."""
    tls = _tls(certs_dir, "context-server")
    with pytest.raises(ConfigError, match="tls_client_ca is set but require_client_cert is false") as caught:
        ContextSettings.load(**tls)
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match=r"app_grants .* require_client_cert is false"):
        ContextSettings.load(**{**tls, "tls_client_ca": None}, app_grants={"spiffe://x/agent": ["*"]})
    with pytest.raises(ConfigError, match="app_grants"):
        ContextSettings.load(dev_plaintext=True, app_grants={"spiffe://x/agent": ["*"]})
    granted = ContextSettings.load(**tls, require_client_cert=True, app_grants={"spiffe://x/agent": ["*"]})
    assert granted.require_client_cert and granted.app_grants
    # TLS without client certificates, for bearer tokens and loopback development.
    assert not ContextSettings.load(**{**tls, "tls_client_ca": None}).require_client_cert
