"""Certificate and key files are checked when a service starts, and a bad
one is a ConfigError that names the setting and the file: a key given as a
certificate, a certificate given as a key, a key of another certificate,
and the context service's client files for the cache service."""

from __future__ import annotations

import pathlib

import pytest

from agentctx_common.errors import ConfigError
from tests.support.servers import cache_settings, context_settings, start_cache, start_context


@pytest.mark.parametrize(
    ("files", "needles"),
    [
        ({"tls_cert": "context-server.key"}, ["tls_cert", "context-server.key", "private key"]),
        ({"tls_key": "context-server.pem"}, ["tls_key", "context-server.pem", "certificate"]),
        ({"tls_key": "cache-server.key"}, ["tls_key", "cache-server.key", "does not match", "context-server.pem"]),
        ({"tls_client_ca": "ca.key"}, ["tls_client_ca", "ca.key"]),
    ],
)
async def test_bad_server_files_name_the_file(
    certs_dir: pathlib.Path, tmp_path: pathlib.Path, files: dict[str, str], needles: list[str]
) -> None:
    overrides: dict[str, object] = {k: certs_dir / v for k, v in files.items()}
    if "tls_client_ca" in overrides:
        overrides["require_client_cert"] = True
    with pytest.raises(ConfigError) as caught:
        await start_context(context_settings(certs_dir, tmp_path, **overrides))
    message = str(caught.value)
    assert "in use" not in message
    for needle in needles:
        assert needle in message, message
    assert "\n" not in message


async def test_bad_cache_server_key_names_the_file(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match=r"tls_key .*context-server\.key does not match"):
        await start_cache(cache_settings(certs_dir, tmp_path, tls_key=certs_dir / "context-server.key"))


@pytest.mark.parametrize(
    ("files", "needles"),
    [
        ({"cache_cert": "missing.pem"}, ["cache_cert", "not found", "missing.pem"]),
        ({"cache_key": "missing.key"}, ["cache_key", "not found", "missing.key"]),
        ({"cache_ca": "missing-ca.pem"}, ["cache_ca", "not found", "missing-ca.pem"]),
        ({"cache_key": "agent-client.key"}, ["cache_key", "does not match", "context-client.pem"]),
        ({"cache_cert": "context-client.key"}, ["cache_cert", "private key"]),
    ],
)
async def test_bad_cache_client_files_fail_at_start(
    certs_dir: pathlib.Path, tmp_path: pathlib.Path, files: dict[str, str], needles: list[str]
) -> None:
    overrides = {k: certs_dir / v for k, v in files.items()}
    with pytest.raises(ConfigError) as caught:
        await start_context(context_settings(certs_dir, tmp_path, **overrides))
    for needle in needles:
        assert needle in str(caught.value), caught.value


def test_cache_client_files_go_together(certs_dir: pathlib.Path) -> None:
    from context_service.settings import ContextSettings

    with pytest.raises(ConfigError, match="cache_ca, cache_cert and cache_key go together"):
        ContextSettings.load(dev_plaintext=True, cache_ca=certs_dir / "ca.pem", cache_cert=certs_dir / "context-client.pem")
    # None at all is allowed: Generate answers FAILED_PRECONDITION.
    assert ContextSettings.load(dev_plaintext=True).cache_ca is None
