"""Environment variables: a complex value that is not JSON is one line
naming the variable (never its value), and a variable with a service's
prefix that names no setting is a warning, not silence."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from agentctx_common.errors import ConfigError
from cache_service.settings import CacheSettings
from context_service.settings import ContextSettings


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AGENTCTX_CONTEXT_APP_GRANTS", "notjson-secret"),
        ("AGENTCTX_CONTEXT_SESSION_DEFAULTS", '{"selection": [1'),
        ("AGENTCTX_CONTEXT_BEARER_TOKENS", "secret-token"),
    ],
)
def test_malformed_json_names_the_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        ContextSettings.load(dev_plaintext=True)
    message = str(caught.value)
    assert variable in message and "not valid JSON" in message
    assert value not in message and "secret" not in message
    assert "\n" not in message


def test_malformed_json_is_one_line_from_the_command_line(tmp_path) -> None:
    env = {**os.environ, "AGENTCTX_CONTEXT_APP_GRANTS": "notjson", "AGENTCTX_CONTEXT_DEV_PLAINTEXT": "true"}
    result = subprocess.run(
        [sys.executable, "-m", "agentctx_cli.main", "serve", "context"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "AGENTCTX_CONTEXT_APP_GRANTS" in lines[0]


def test_unknown_variables_are_warned_about(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                            certs_dir) -> None:
    monkeypatch.setenv("AGENTCTX_CONTEXT_PROT", "6000")
    monkeypatch.setenv("AGENTCTX_CONTEXT_SESSION_DEFAULTS__MODEL", "m")  # nested: a known setting
    monkeypatch.setenv("AGENTCTX_CACHE_MAX_ENTRYS", "9")
    with caplog.at_level(logging.WARNING, logger="agentctx.settings"):
        context = ContextSettings.load(dev_plaintext=True)
    assert context.port == 50051 and context.session_defaults == {"model": "m"}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert "AGENTCTX_CONTEXT_PROT" in messages[0] and "did you mean AGENTCTX_CONTEXT_PORT" in messages[0]
    assert "6000" not in messages[0]
    assert caplog.records[0].levelno == logging.WARNING

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agentctx.settings"):
        CacheSettings.load(tls_cert=certs_dir / "cache-server.pem", tls_key=certs_dir / "cache-server.key",
                           tls_client_ca=certs_dir / "ca.pem")
    assert [r.__dict__["variable"] for r in caplog.records] == ["AGENTCTX_CACHE_MAX_ENTRYS"]
