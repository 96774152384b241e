"""The agentctx command line: expected failures are one line and a non-zero
exit, never a traceback."""

from __future__ import annotations

import pathlib
import socket
import subprocess
import sys

from cryptography import x509

from agentctx_common.certs import CACHE_SERVICE_ID, CONTEXT_SERVICE_ID, SAMPLE_AGENT_ID
from tests.support.processes import free_port, write_config


def agentctx(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentctx_cli.main", *args],
        capture_output=True, text=True, timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_unknown_flag() -> None:
    assert_one_line_error(agentctx("serve", "context", "--bogus"), "unrecognized arguments", "--bogus")


def test_unknown_command() -> None:
    assert_one_line_error(agentctx("launch"), "invalid choice")


def test_missing_config_file(tmp_path: pathlib.Path) -> None:
    assert_one_line_error(agentctx("serve", "context", "--config", str(tmp_path / "none.toml")), "not found")


def test_malformed_config(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[context]\nport = = 1\n")
    assert_one_line_error(agentctx("serve", "context", "--config", str(config)), "not valid TOML")


def test_invalid_setting(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[cache]\nport = 70000\n')
    assert_one_line_error(agentctx("serve", "cache", "--config", str(config)), "port")


def test_missing_certificate_files(tmp_path: pathlib.Path, certs_dir: pathlib.Path) -> None:
    config = write_config(
        tmp_path / "c.toml", tmp_path / "no-certs", context_port=free_port(), cache_port=free_port(),
        data_dir=tmp_path / "data",
    )
    assert_one_line_error(agentctx("serve", "cache", "--config", str(config)), "not found", "no-certs")


def test_port_in_use(tmp_path: pathlib.Path, certs_dir: pathlib.Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = write_config(
            tmp_path / "c.toml", certs_dir, context_port=free_port(), cache_port=port, data_dir=tmp_path / "data"
        )
        assert_one_line_error(agentctx("serve", "cache", "--config", str(config)), "in use", str(port))


def test_certs_init_writes_ca_and_identities(tmp_path: pathlib.Path) -> None:
    result = agentctx("certs", "init", "--dir", str(tmp_path / "certs"))
    assert result.returncode == 0, result.stderr
    directory = tmp_path / "certs"

    def uris(stem: str) -> list[str]:
        cert = x509.load_pem_x509_certificate((directory / f"{stem}.pem").read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return san.get_values_for_type(x509.UniformResourceIdentifier)

    assert uris("context-client") == [CONTEXT_SERVICE_ID]
    assert uris("cache-server") == [CACHE_SERVICE_ID]
    assert uris("agent-client") == [SAMPLE_AGENT_ID]
    assert (directory / "ca.key").stat().st_mode & 0o077 == 0
    # A second run keeps what is there.
    again = agentctx("certs", "init", "--dir", str(directory))
    assert again.returncode == 0 and "already present" in again.stdout


def test_cache_service_env_carries_every_provider_key_and_route_key(tmp_path: pathlib.Path) -> None:
    from agentctx_cli.pair import service_env

    config = tmp_path / "agentctx.toml"
    config.write_text('[cache]\nroutes = [{pattern = "qwen*", provider = "openai", name = "vllm", '
                      'api_key_env = "VLLM_API_KEY"}]\n')
    environ = {"PATH": "/bin", "GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o",
               "VLLM_API_KEY": "v", "SGLANG_KEY": "s", "OTHER_SECRET": "x",
               "AGENTCTX_CACHE_ROUTES": '[{"pattern": "llama*", "provider": "openai", "name": "sglang", '
                                        '"api_key_env": "SGLANG_KEY"}]'}
    cache = service_env("cache", environ, config)
    assert {k: cache[k] for k in ("GEMINI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "VLLM_API_KEY",
                                  "SGLANG_KEY")} == {"GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a",
                                                     "OPENAI_API_KEY": "o", "VLLM_API_KEY": "v", "SGLANG_KEY": "s"}
    assert "OTHER_SECRET" not in cache
    context = service_env("context", environ, config)
    assert set(context) == {"PATH", "PYTHONUNBUFFERED"}
    # A config file that does not parse names no route key (the service reports it).
    config.write_text("[cache\n")
    assert "VLLM_API_KEY" not in service_env("cache", environ, config)
