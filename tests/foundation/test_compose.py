"""docker-compose.yml cannot run here (no Docker engine), so check that what
it says matches the code: commands are real CLI commands, environment
variables are real settings, ports agree, certificate paths are files that
`agentctx certs init` writes, and the Dockerfile copies what exists."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from agentctx_cli.main import build_parser
from agentctx_common.certs import DEV_LEAVES
from cache_service.settings import CacheSettings
from context_service.settings import ContextSettings

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETTINGS = {"AGENTCTX_CONTEXT_": ContextSettings, "AGENTCTX_CACHE_": CacheSettings}
CERT_FILES = {"ca.pem"} | {f"{leaf.stem}.{ext}" for leaf in DEV_LEAVES for ext in ("pem", "key")}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _interpolated(value: str) -> str:
    """What compose makes of ``${NAME:-default}`` with NAME unset."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", value)


def _env(service: dict) -> dict[str, str]:
    return {k: _interpolated(str(v)) for k, v in (service.get("environment") or {}).items()}


def test_services_and_their_order(compose) -> None:
    services = compose["services"]
    assert {"certs", "postgres", "redis", "migrate", "cache", "context", "context-2"} <= set(services)
    for context in ("context", "context-2"):
        assert services[context]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["cache"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["cache"]["depends_on"]["certs"]["condition"] == "service_completed_successfully"


def test_commands_are_real_cli_commands(compose) -> None:
    parser = build_parser()
    commands = [s["command"] for s in compose["services"].values() if s.get("command", [None])[0] == "agentctx"]
    assert len(commands) == 5
    for command in commands:
        args = parser.parse_args(command[1:])  # exits (fails the test) on an unknown command or flag
        assert callable(args.func)


def test_environment_variables_are_real_settings(compose) -> None:
    for name, service in compose["services"].items():
        for variable, _value in _env(service).items():
            for prefix, settings in SETTINGS.items():
                if variable.startswith(prefix):
                    field = variable.removeprefix(prefix).lower()
                    assert field in settings.model_fields, f"{name}: {variable} is not a setting"


def test_environment_values_validate(compose, monkeypatch) -> None:
    """Loaded the way the containers load them: from the environment."""
    for name, prefix in (("context", "AGENTCTX_CONTEXT_"), ("cache", "AGENTCTX_CACHE_")):
        with monkeypatch.context() as env:
            for variable, value in _env(compose["services"][name]).items():
                env.setenv(variable, value)
            settings = SETTINGS[prefix].load()  # raises on a value the service would refuse
        assert settings.port in (50051, 50052)
    # The sample agent may use every app, as with `agentctx up`.
    with monkeypatch.context() as env:
        for variable, value in _env(compose["services"]["context"]).items():
            env.setenv(variable, value)
        assert ContextSettings.load().app_grants == {"spiffe://agentctx.local/agent/sample": ["*"]}


def test_ports_and_targets_agree(compose) -> None:
    services = compose["services"]
    context, cache = _env(services["context"]), _env(services["cache"])
    assert services["context"]["ports"] == [f"{context['AGENTCTX_CONTEXT_PORT']}:{context['AGENTCTX_CONTEXT_PORT']}"]
    assert services["context-2"]["ports"] == [f"50061:{context['AGENTCTX_CONTEXT_PORT']}"]
    assert _env(services["context-2"]) == context
    # Three cache replicas on one compose name: reached by DNS, no host port.
    assert services["cache"]["deploy"]["replicas"] == 3 and "ports" not in services["cache"]
    assert services["cache"]["expose"] == [cache["AGENTCTX_CACHE_PORT"]]
    assert context["AGENTCTX_CONTEXT_CACHE_TARGET"] == f"dns:///cache:{cache['AGENTCTX_CACHE_PORT']}"
    assert cache["AGENTCTX_CACHE_REDIS_URL"] == "redis://redis:6379/0"
    assert context["AGENTCTX_CONTEXT_DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in context["AGENTCTX_CONTEXT_DATABASE_URL"]
    # The dev server certificates name localhost, not the compose host names.
    assert context["AGENTCTX_CONTEXT_CACHE_SERVER_NAME"] == "localhost"


def test_certificate_paths_are_files_certs_init_writes(compose) -> None:
    init = compose["services"]["certs"]["command"]
    directory = init[init.index("--dir") + 1]
    for name, service in compose["services"].items():
        for variable, value in _env(service).items():
            if value.startswith(directory + "/"):
                assert value.removeprefix(directory + "/") in CERT_FILES, f"{name}: {variable}={value}"


def test_dockerfile_copies_what_exists() -> None:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        match = re.match(r"COPY (.+) \S+$", line)
        if match:
            for source in match.group(1).split():
                assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"


def test_each_service_builds_the_image_of_its_own_target(compose) -> None:
    """The context image has no provider SDK, the cache image no database
    driver: each service builds the Dockerfile target that installs its extra."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"^FROM \S+ AS ", dockerfile, flags=re.M)[1:]
    targets = {
        stage.split()[0]: extra.group(1)
        for stage in stages
        if (extra := re.search(r"^RUN pip install .*'\.\[([\w,]+)\]'", stage, re.M))
    }
    # The context image can keep artifact bytes in an S3-compatible store.
    assert targets == {"context": "context,s3", "cache": "cache"}
    for name, service in compose["services"].items():
        if "build" in service:
            expected = "cache" if name == "cache" else "context"
            assert service["build"]["target"] == expected, name
