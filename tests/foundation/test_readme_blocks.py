"""The README walked as a newcomer walks it, from a fresh clone (a directory
with only the venv ``make venv`` builds): every ``sh`` block and every
client snippet is extracted and run, or says below why not.

- The Configuration block starts a pair with the defaults; the grpcurl
  walkthrough, the Diagnostics block, the Python client snippets and the
  TypeScript snippet (compiled with ``tsc --strict``) run against it.
- "Use a real model" runs once per provider (Gemini, Anthropic, OpenAI and
  a vLLM route) against the strict local fakes in tests/fakes/: the
  README's placeholder key becomes the fake's key and the provider's
  endpoint points at the fake (``AGENTCTX_CACHE_*_BASE_URL``, the route's
  ``base_url``); nothing else changes.
- The Gemini block starts a cache service; the TOML blocks parse and name
  only real settings.

Only the ports change (to free ones, through the environment variables the
README documents), so that the test can run beside other pairs. A block
this test does not know fails it: run the new block here, or say in
NOT_RUN why it is not run."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest

from agentctx_common.settings import check_file_keys
from cache_service.settings import CacheSettings
from context_service.settings import ContextSettings
from tests.polyglot.test_node_agent import node  # noqa: F401 - the fixture: node with tests/polyglot's packages
from tests.support.processes import free_port, wait_healthy

ROOT = pathlib.Path(__file__).parents[2]
POLYGLOT = ROOT / "tests" / "polyglot"

# Blocks run elsewhere or not at all, and why.
NOT_RUN = {
    "make": "`make up` is `make venv` plus `agentctx up` (tests/demo); `make test` is this suite",
    "npm": "npm install from the registry; tests/polyglot installs the same packages, pinned, with npm ci "
           "(the TypeScript snippet runs on them here)",
    "adk-install": "pip install of google-adk from the registry; tests/adk/venv.py builds the ADK venv with "
                   "the same command (the constraints, the client, then clients/adk)",
    "adk-fragment": "fragments of an ADK program (agent, tools, Runner undefined); examples/adk_agent.py is their "
                    "runnable whole, run with the defaults by tests/adk/test_adk_example.py",
    "openai-agents-fragment": "its agent calls OpenAI's API (the SDK's default model); "
                              "tests/openai_agents/oa_session_checks.py runs the same session and Runner calls "
                              "against the pair with a scripted model",
    "go": "no Go toolchain in CI; Debian 12's golang-go is Go 1.19, and the snippet also needs protoc-gen-go, "
          "protoc-gen-go-grpc and gRPC-Go >= 1.63 from the Go module proxy: not tried within the CI budget",
}
# What each provider's walk sets: the key variable the README names, the
# model, and the fake.
PROVIDERS = {
    "gemini": ("GEMINI_API_KEY", "gemini-2.5-flash"),
    "anthropic": ("ANTHROPIC_API_KEY", "claude-sonnet-4-5"),
    "openai": ("OPENAI_API_KEY", "gpt-4.1-mini"),
    "vllm": ("VLLM_API_KEY", "qwen2.5-7b"),
}


def _fenced(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def _blocks() -> list[str]:
    return _fenced("sh")


def _kind(block: str) -> str:
    if block.startswith("make "):
        return "make"
    if "-m bench." in block:
        return "bench"
    if "agentctx up --no-demo" in block:
        return "real-start-routes" if "AGENTCTX_CACHE_ROUTES" in block else "real-start"
    if "$M" in block:
        return "real-call"
    if "$G" in block or "$C" in block:
        return "grpcurl"
    if "GEMINI_API_KEY=" in block:
        return "gemini"
    if "agentctx inspect" in block or "agentctx context-cache" in block:
        return "diagnostics"
    if "agentctx serve context" in block:
        return "configuration"
    if block.startswith("npm install"):
        return "npm"
    if "pip install" in block and "clients/adk" in block:
        return "adk-install"
    return "unknown"


def _snippet_kind(lang: str, block: str) -> str:
    if lang == "python":
        if "agentctx_openai_agents" in block:
            return "openai-agents-fragment"
        return "adk-fragment" if "agentctx_adk" in block else "client"
    return {"ts": "ts", "go": "go", "toml": "toml"}.get(lang, "unknown")


def _only(kind: str) -> str:
    blocks = [b for b in _blocks() if _kind(b) == kind]
    assert len(blocks) == 1, f"one {kind} block expected, found {len(blocks)}"
    return blocks[0]


def _snippets(kind: str) -> list[str]:
    return [b for lang in ("python", "ts", "go", "toml") for b in _fenced(lang) if _snippet_kind(lang, b) == kind]


def test_every_block_is_run_or_says_why_not() -> None:
    kinds = [_kind(b) for b in _blocks()]
    snippets = [_snippet_kind(lang, b) for lang in ("python", "ts", "go", "toml") for b in _fenced(lang)]
    assert "unknown" not in kinds + snippets, [b for b in _blocks() if _kind(b) == "unknown"]
    run = {"grpcurl", "configuration", "diagnostics", "gemini", "real-start", "real-start-routes", "real-call"}
    assert set(kinds) - set(NOT_RUN) == run
    assert set(snippets) - set(NOT_RUN) == {"client", "ts", "toml"}
    # The figures for the record: blocks and snippets this test runs, and not.
    ran = sum(k not in NOT_RUN for k in kinds + snippets)
    print(f"README: {ran} of {len(kinds + snippets)} blocks and snippets run; not run: "
          + ", ".join(f"{k} x{(kinds + snippets).count(k)}" for k in NOT_RUN if k in kinds + snippets))


def test_the_toml_blocks_name_only_real_settings(tmp_path: pathlib.Path) -> None:
    tables = {"context": ContextSettings, "cache": CacheSettings}
    snippets = _snippets("toml")
    assert snippets
    for snippet in snippets:
        document = tomllib.loads(snippet)
        assert document and set(document) <= set(tables), snippet
        for name, table in document.items():
            check_file_keys(tables[name], tmp_path / "README.toml", table)  # ConfigError for a key that is not one


@pytest.fixture
def clone(tmp_path: pathlib.Path) -> pathlib.Path:
    """A fresh clone after `make venv`, as far as the blocks can tell."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    return tmp_path


def _start(script: str, clone: pathlib.Path, env: dict[str, str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    (clone / "block.sh").write_text(script)
    with open(log, "ab") as out:
        # Its own process group, so that the background job stops with it.
        return subprocess.Popen(["bash", "block.sh"], cwd=clone, env={**os.environ, **env}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the background job, too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("a process of the block outlived SIGTERM")


def _wait_for(path: pathlib.Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"{path.name} was not written"
        time.sleep(0.05)


@pytest.fixture
def ports() -> Iterator[dict[str, int]]:
    yield {"context": free_port(), "cache": free_port()}


def _run(script: str, clone: pathlib.Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=clone, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def _on_ports(text: str, ports: dict[str, int]) -> str:
    return (text.replace("127.0.0.1:50051", f"127.0.0.1:{ports['context']}")
            .replace("localhost:50051", f"localhost:{ports['context']}")
            .replace("127.0.0.1:50052", f"127.0.0.1:{ports['cache']}"))


def _env(ports: dict[str, int]) -> dict[str, str]:
    return {"AGENTCTX_CONTEXT_PORT": str(ports["context"]), "AGENTCTX_CACHE_PORT": str(ports["cache"]),
            "AGENTCTX_CONTEXT_CACHE_TARGET": f"127.0.0.1:{ports['cache']}",
            "AGENTCTX_TARGET": f"127.0.0.1:{ports['context']}"}


def _run_python_snippet(snippet: str, clone: pathlib.Path, ports: dict[str, int]) -> str:
    # Top-level await, as `python -m asyncio` runs it: inside an async main here.
    program = "import asyncio\n\nasync def main() -> None:\n" + textwrap.indent(_on_ports(snippet, ports), "    ") \
        + "\n\nasyncio.run(main())\n"
    (clone / "snippet.py").write_text(program)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=clone, capture_output=True, text=True, timeout=120)
    (clone / "snippet.py").unlink()
    assert done.returncode == 0, program + done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_configuration_walkthrough_diagnostics_and_python_snippets_run_as_written(
        clone: pathlib.Path, ports: dict[str, int]) -> None:
    env = _env(ports)
    log = clone.parent / f"{clone.name}-configuration.log"
    pair = _start(_only("configuration"), clone, env, log)
    try:
        certs = clone / ".agentctx" / "certs"
        _wait_for(clone / ".agentctx" / "agentctx.toml", pair)  # written after the certificates
        wait_healthy(ports["cache"], certs, "context-client", pair)
        wait_healthy(ports["context"], certs, "agent-client", pair)

        walkthrough = _on_ports("\n".join(b for b in _blocks() if _kind(b) == "grpcurl"), ports)
        ran = _run(walkthrough, clone, env)
        out = ran.stdout + ran.stderr
        assert out.count("ERROR:") == 1, out  # the stale etag, shown
        assert out.count('"status": "SERVING"') == 4, out  # two health checks of each service
        assert '"compacted": true' in out, out
        assert '"tool": "write_report"' in out and '"reported": true' in out, out  # through the tool's token
        assert re.search(r'"artifacts": \[\s*"report\.md"', out), out  # listed once the response collected it

        diagnostics = _run("G=unused\n" + _only("diagnostics"), clone, env)
        out = diagnostics.stdout
        assert "Context lifecycle of apps/travel/users/alice/sessions/trip-1" in out, diagnostics.stderr
        view = json.loads(out[out.index("\n{") + 1: out.rindex("}") + 1])
        assert view["session"] == "apps/travel/users/alice/sessions/trip-1"
        # The confirmation's fingerprint is the placeholder the text explains:
        # refused, in one line, and nothing changes.
        assert diagnostics.returncode == 1
        assert "INVALIDATION_CONFIRMATION_MISMATCH" in diagnostics.stderr and "scope_fingerprint" in diagnostics.stderr

        [tools] = [s for s in _snippets("client") if "ToolContext" in s]
        first, errors = [s for s in _snippets("client") if s != tools]
        assert _run_python_snippet(first, clone, ports).strip()  # the reply's text and request tokens
        # The reason prints as its name (not 40), the etag follows.
        assert _run_python_snippet(errors, clone, ports).startswith("ETAG_MISMATCH ")
        # The tool's staged save, visible once the agent answered the call.
        assert _run_python_snippet(tools, clone, ports).strip() == "# Oslo: sunny"
    finally:
        _stop_group(pair)
    text = log.read_text()
    assert "Traceback" not in text and "database schema upgraded from empty" in text, text
    # Nothing outside the git-ignored home that `make clean` removes.
    assert sorted(p.name for p in clone.iterdir()) == [".agentctx", ".venv", "block.sh"]
    assert ".agentctx/" in (ROOT / ".gitignore").read_text().split()
    assert re.search(r"^clean:\n\trm -rf .*\.agentctx", (ROOT / "Makefile").read_text(), flags=re.M)


@pytest.mark.slow
def test_the_typescript_snippet_compiles_strictly_and_runs(node: str, clone: pathlib.Path,  # noqa: F811
                                                          ports: dict[str, int], tmp_path_factory: Any) -> None:
    [snippet] = _snippets("ts")
    project = tmp_path_factory.mktemp("ts")
    # What the README says a TypeScript agent needs: ./gen (copied from
    # tests/polyglot/gen) and the npm packages (tests/polyglot's, pinned).
    shutil.copytree(POLYGLOT / "gen", project / "gen")
    (project / "node_modules").symlink_to(POLYGLOT / "node_modules")
    (project / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    (project / "tsconfig.json").write_text(json.dumps({
        "extends": str(POLYGLOT / "tsconfig.json"),
        "compilerOptions": {"rootDir": ".", "outDir": "build", "types": ["node"],
                            "typeRoots": [str(POLYGLOT / "node_modules" / "@types")]},
        "include": ["agent.ts", "gen/**/*.ts"]}))
    (project / "agent.ts").write_text(_on_ports(snippet, ports))
    tsc = POLYGLOT / "node_modules" / "typescript" / "bin" / "tsc"
    compiled = subprocess.run([node, str(tsc), "-p", "."], cwd=project, capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    (project / "build" / "package.json").write_text(json.dumps({"type": "module"}))

    env = _env(ports)
    log = clone.parent / f"{clone.name}-ts.log"
    pair = _start(_only("configuration"), clone, env, log)
    try:
        certs = clone / ".agentctx" / "certs"
        _wait_for(clone / ".agentctx" / "agentctx.toml", pair)
        wait_healthy(ports["cache"], certs, "context-client", pair)
        wait_healthy(ports["context"], certs, "agent-client", pair)
        (project / ".agentctx").symlink_to(clone / ".agentctx")
        ran = subprocess.run([node, "build/agent.js"], cwd=project, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "text" in ran.stdout, ran.stdout  # the reply's parts
    finally:
        _stop_group(pair)


@pytest.mark.slow
def test_the_gemini_block_starts_a_cache_service(clone: pathlib.Path, ports: dict[str, int]) -> None:
    assert _run(".venv/bin/agentctx init", clone, {}).returncode == 0
    env = {"AGENTCTX_CACHE_PORT": str(ports["cache"])}
    log = clone.parent / f"{clone.name}-gemini.log"
    block = _only("gemini")
    assert "AGENTCTX_CACHE_GEMINI_API_KEY=…" in block
    # Copied as it is, the placeholder is refused at start, and named as one.
    refused = _start(block, clone, env, log)
    assert refused.wait(timeout=120) != 0
    text = log.read_text()
    assert "placeholder" in text and "AGENTCTX_CACHE_GEMINI_API_KEY" in text and "Traceback" not in text
    # With a key in its place (no call is made), the block starts a cache service.
    cache = _start(block.replace("=…", "=AIza-stand-in-key-for-this-test"), clone, env, log)
    try:
        wait_healthy(ports["cache"], clone / ".agentctx" / "certs", "context-client", cache)
    finally:
        _stop_group(cache)
    assert "Traceback" not in log.read_text()


def _fake(provider: str) -> Any:
    if provider == "gemini":
        from tests.fakes.gemini_server import FakeGemini
        return FakeGemini()
    if provider == "anthropic":
        from tests.fakes.anthropic_server import FakeAnthropic
        return FakeAnthropic()
    from tests.fakes.openai_server import FakeOpenAI
    return FakeOpenAI(flavor="vllm") if provider == "vllm" else FakeOpenAI()


def _start_block(provider: str, key: str, fake_url: str) -> str:
    """The README's start block for ``provider``: its key line uncommented
    (the others commented), the placeholder key the fake's."""
    variable, _ = PROVIDERS[provider]
    if provider == "vllm":
        block = _only("real-start-routes").replace("http://127.0.0.1:8000/v1", f"{fake_url}/v1")
    else:
        block = _only("real-start")
        block = re.sub(r"^export ", "# export ", block, flags=re.M)
    block = re.sub(rf"^(# )?export {variable}=…", f"export {variable}={key}", block, flags=re.M)
    assert f"export {variable}={key}" in block, block
    return block.replace(".venv/bin/agentctx up --no-demo", "exec .venv/bin/agentctx up --no-demo")


@pytest.mark.slow
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_use_a_real_model_walks_on_each_provider(provider: str, clone: pathlib.Path, ports: dict[str, int]) -> None:
    _, model = PROVIDERS[provider]
    assert f"`{model}`" in (ROOT / "README.md").read_text()
    with _fake(provider) as fake:
        url = fake.base_url
        env = _env(ports)
        env.pop("AGENTCTX_CONTEXT_CACHE_TARGET")  # `up` writes its own
        endpoint = {"gemini": ("AGENTCTX_CACHE_GEMINI_BASE_URL", url),
                    "anthropic": ("AGENTCTX_CACHE_ANTHROPIC_BASE_URL", url),
                    "openai": ("AGENTCTX_CACHE_OPENAI_BASE_URL", f"{url}/v1")}.get(provider)
        if endpoint:
            env[endpoint[0]] = endpoint[1]
        log = clone.parent / f"{clone.name}-{provider}.log"
        script = _start_block(provider, fake.api_key, url)
        clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "AGENTCTX_CACHE_ROUTES"}
        (clone / "block.sh").write_text(script)
        with open(log, "ab") as out:
            up = subprocess.Popen(["bash", "block.sh"], cwd=clone, env={**clean, **env}, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            certs = clone / ".agentctx" / "certs"
            _wait_for(clone / ".agentctx" / "agentctx.toml", up)
            wait_healthy(ports["cache"], certs, "context-client", up)
            wait_healthy(ports["context"], certs, "agent-client", up)
            call = _on_ports(_only("real-call").replace("M=gemini-2.5-flash", f"M={model}"), ports)
            ran = subprocess.run(["bash", "-c", call], cwd=clone, env={**clean, **_env(ports)},
                                 capture_output=True, text=True, timeout=120)
            out = ran.stdout + ran.stderr
            assert ran.returncode == 0 and "ERROR" not in out, out + log.read_text()[-3000:]
            assert '"reply"' in out and '"cache"' in out, out
            assert f"model                {model}" in out and "latest reply cache" in out, out
        finally:
            _stop_group(up)
    assert "Traceback" not in log.read_text()
