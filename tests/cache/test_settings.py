"""Cache settings: provider configuration, the API key's sources and
secrecy, and start-up validation."""

from __future__ import annotations

import pathlib

import pytest

from agentctx_common.errors import ConfigError
from cache_service.app import CacheApp
from cache_service.settings import CacheSettings
from tests.support.servers import cache_settings


def test_defaults_match_the_reference_bounds(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    s = cache_settings(certs_dir, tmp_path)
    assert (s.default_provider, s.failure_mode, s.max_entries, s.default_ttl_s, s.max_ttl_s) == (
        "local", "bypass", 256, 300.0, 3600.0)
    assert (s.max_prefix_bytes, s.max_scope_bytes, s.max_waiters) == (4 * 1024 * 1024, 16 * 1024, 128)
    assert (s.create_timeout_s, s.delete_timeout_s, s.sightings_before_create) == (5.0, 2.0, 1)
    assert not s.gemini_configured


def test_the_api_key_comes_from_our_variable_first(certs_dir, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "from-sdk-variable")
    assert cache_settings(certs_dir, tmp_path).gemini_api_key.get_secret_value() == "from-sdk-variable"  # type: ignore[union-attr]
    monkeypatch.setenv("AGENTCTX_CACHE_GEMINI_API_KEY", "from-our-variable")
    s = cache_settings(certs_dir, tmp_path)
    assert s.gemini_api_key is not None and s.gemini_api_key.get_secret_value() == "from-our-variable"
    assert s.gemini_configured
    assert "from-our-variable" not in repr(s) and "from-our-variable" not in str(s.model_dump())


def test_gemini_as_default_needs_credentials(certs_dir, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("AGENTCTX_CACHE_GEMINI_API_KEY", raising=False)
    with pytest.raises(Exception, match="no Gemini API key"):
        cache_settings(certs_dir, tmp_path, default_provider="gemini")
    with pytest.raises(Exception, match="gemini_project and gemini_location"):
        cache_settings(certs_dir, tmp_path, gemini_vertexai=True)


def test_invalid_values_name_the_field_without_the_key(certs_dir, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "cache.toml"
    config.write_text(
        "[cache]\n"
        f'tls_cert = "{certs_dir / "cache-server.pem"}"\ntls_key = "{certs_dir / "cache-server.key"}"\n'
        f'tls_client_ca = "{certs_dir / "ca.pem"}"\nfailure_mode = "explode"\nmax_entries = 0\n'
    )
    monkeypatch.setenv("AGENTCTX_CACHE_GEMINI_API_KEY", "very-secret-key")
    with pytest.raises(ConfigError) as err:
        CacheSettings.load(config)
    message = str(err.value)
    assert "failure_mode" in message and "max_entries" in message
    assert "very-secret-key" not in message


async def test_gemini_is_built_only_when_configured(certs_dir, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("AGENTCTX_CACHE_GEMINI_API_KEY", raising=False)
    app = await CacheApp.create(cache_settings(certs_dir, tmp_path))
    assert set(app.providers) == {"local", "local-anthropic", "local-openai"}
    await app.close()
    app = await CacheApp.create(cache_settings(certs_dir, tmp_path, gemini_api_key="gem-key-xyz",
                                               gemini_base_url="http://127.0.0.1:9"))
    assert set(app.providers) == {"local", "local-anthropic", "local-openai", "gemini"}
    assert "gem-key-xyz" not in repr(app.providers["gemini"]) + repr(app.settings) + repr(app)
    await app.close()
