"""The polyglot clients, against both services as real processes over TLS
with a client certificate, each running a five-turn, tool-using
conversation:

- agent.ts: TypeScript on the stubs generated from protos/ into gen/
  (protoc-gen-es, Connect's gRPC transport), type-checked by tsc --strict
  before it runs; it also decodes two errors' ErrorInfo by the generated
  ErrorReason enum and domain option.
- agent.js: plain Node.js with the stubs loaded from protos/ at run time
  (@grpc/grpc-js and @grpc/proto-loader).

and artifacts_memory.ts, on the same generated stubs: artifacts saved and
loaded as streams, attached to BuildContext, and memory searched; and
tool_agent.ts, whose tool runs in a separate Node process
(tool_process.ts) holding only its tool token.

Node packages come from package-lock.json (npm ci)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
from typing import Any

import pytest

from tests.e2e.processes import ServiceProcesses

HERE = pathlib.Path(__file__).parent


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required for the polyglot client tests (Node.js 20 or later)")
    return path


@pytest.fixture(scope="module")
def node() -> str:
    """node, with this folder's packages installed from the lock file
    (again only when the lock file is newer than the installed tree)."""
    installed = HERE / "node_modules" / ".package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < (HERE / "package-lock.json").stat().st_mtime:
        subprocess.run([_tool("npm"), "ci", "--silent", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=600)
    return _tool("node")


@pytest.fixture(scope="module")
def ts_agent(node: str) -> list[str]:
    """``node build/agent.js``, compiled from agent.ts once it type-checks."""
    shutil.rmtree(HERE / "build", ignore_errors=True)
    tsc = HERE / "node_modules" / "typescript" / "bin" / "tsc"
    # tsconfig.json: strict, and nothing is emitted on a type error.
    result = subprocess.run([node, str(tsc), "-p", str(HERE)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, "agent.ts does not type-check:\n" + result.stdout + result.stderr
    return [node, str(HERE / "build" / "agent.js")]


def _env(pair: ServiceProcesses, certs_dir: pathlib.Path) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTCTX_TARGET": f"127.0.0.1:{pair.context_port}",
        "AGENTCTX_CA": str(certs_dir / "ca.pem"),
        "AGENTCTX_CERT": str(certs_dir / "agent-client.pem"),
        "AGENTCTX_KEY": str(certs_dir / "agent-client.key"),
    }


def run_agent(command: list[str], certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> dict[str, Any]:
    pair = ServiceProcesses(certs_dir, tmp_path, cache={"local_min_cache_tokens": 64, "min_prefix_tokens": 64}).start()
    try:
        run = subprocess.run(command, env=_env(pair, certs_dir), capture_output=True, text=True, timeout=120)
    finally:
        pair.stop()
    assert run.returncode == 0, run.stderr
    report: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["ok"] is True
    turns = report["turns"]
    assert len(turns) == 5
    assert report["tool_calls"] >= 1 and any(t["tool_call"] for t in turns)
    assert [t["sequence"] for t in turns] == sorted(t["sequence"] for t in turns)
    assert all(t["prompt_tokens"] > 0 for t in turns)
    assert "CACHE_STATE_CREATED" in {t["cache_state"] for t in turns}, "the stable prefix was cached"
    assert report["events"] == 10, "five inputs and five replies, each stored once"
    assert report["built_contents"] == 11
    return report


def test_typescript_agent_on_generated_stubs(ts_agent: list[str], certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    report = run_agent(ts_agent, certs_dir, tmp_path)
    assert report["errors"] == [
        {"code": "Aborted", "reason": "ETAG_MISMATCH", "domain": "agentctx.dev", "metadata_keys": ["current_etag"],
         "field_violations": []},
        {"code": "InvalidArgument", "reason": "INVALID_NAME", "domain": "agentctx.dev", "metadata_keys": [],
         "field_violations": ["name"]},
    ]


def test_typescript_stubs_reject_a_wrongly_typed_request(node: str, tmp_path: pathlib.Path) -> None:
    """The client is typed from the protos: a number for a string field is a
    compile error, not a run-time surprise."""
    (tmp_path / "node_modules").symlink_to(HERE / "node_modules")
    (tmp_path / "tsconfig.json").write_text(json.dumps({
        "extends": str(HERE / "tsconfig.json"),
        "compilerOptions": {"noEmit": True, "rootDir": "/"},
        "include": ["wrong.ts"],
    }))
    stubs = HERE / "gen" / "agentctx" / "context" / "v1" / "context_service_pb.js"
    (tmp_path / "wrong.ts").write_text(
        'import { createClient } from "@connectrpc/connect";\n'
        'import { createGrpcTransport } from "@connectrpc/connect-node";\n'
        f'import {{ ContextService }} from "{stubs}";\n'
        'const client = createClient(ContextService, createGrpcTransport({ baseUrl: "https://localhost" }));\n'
        'void client.getSession({ name: 42 });\n'
    )
    tsc = HERE / "node_modules" / "typescript" / "bin" / "tsc"
    result = subprocess.run([node, str(tsc), "-p", "."], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in result.stdout.splitlines() if ": error TS" in line]
    assert result.returncode != 0
    assert len(errors) == 1 and errors[0].startswith("wrong.ts(5,") and "TS2322" in errors[0], result.stdout


def test_openai_agents_sdk_session_in_typescript(ts_agent: list[str], certs_dir: pathlib.Path,
                                                 tmp_path: pathlib.Path) -> None:
    """@openai/agents' Runner, three tool-using turns on AgentCtxSession
    (agentctx_session.ts) and on the SDK's MemorySession with one scripted
    model: same items, same model inputs; then pop and clear."""
    node, _ = ts_agent
    pair = ServiceProcesses(certs_dir, tmp_path).start()
    try:
        run = subprocess.run([node, str(HERE / "build" / "openai_agents_agent.js")], env=_env(pair, certs_dir),
                             capture_output=True, text=True, timeout=120)
    finally:
        pair.stop()
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    # Three turns of user input, call, result, answer; each model call's input.
    assert report == {"ok": True, "items": 12, "model_calls": 6, "events": 13, "built_calls": 3,
                      "built_answers": 3}, report


def test_node_agent_with_protos_loaded_at_run_time(node: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    run_agent([node, str(HERE / "agent.js")], certs_dir, tmp_path)


def test_typescript_artifacts_attachments_and_memory(ts_agent: list[str], certs_dir: pathlib.Path,
                                                     tmp_path: pathlib.Path) -> None:
    """artifacts_memory.ts on the generated ArtifactService, ContextService
    and MemoryService stubs: streamed save and load, a pinned version
    attached to BuildContext next to a user image, memory added and found."""
    node, _ = ts_agent
    pair = ServiceProcesses(certs_dir, tmp_path).start()
    try:
        run = subprocess.run([node, str(HERE / "build" / "artifacts_memory.js")], env=_env(pair, certs_dir),
                             capture_output=True, text=True, timeout=120)
    finally:
        pair.stop()
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report == {
        "ok": True, "versions_saved": [0, 1, 0], "sha256_matches": True,
        "loaded_text": "Day 1: Belém. Day 2: Sintra.", "loaded_metadata": {"by": "ts"},
        "versions": [len("Day 1: Belém. Day 2: Sintra.".encode()), len("Day 1: Alfama.")],
        "names": ["plan.md", "user:map.png"], "contents": 3, "attached_text": "Day 1: Alfama.",
        "attached_image": {"mime_type": "image/png", "bytes": 1024},
        "attachment_bytes": report["attachment_bytes"],
        # Any of the query's words, ranked: the entry about seats first.
        "matches": ["apps/polyglot/users/ts-traveller/memories/seat", "apps/polyglot/users/ts-traveller/memories/food"],
        "top_score_positive": True,
        "filtered": ["apps/polyglot/users/ts-traveller/memories/food"],
    }, report
    assert report["attachment_bytes"] > 1024 + len("Day 1: Alfama.")


def test_typescript_tool_runs_in_its_own_process_on_its_token(ts_agent: list[str], certs_dir: pathlib.Path,
                                                              tmp_path: pathlib.Path) -> None:
    """tool_agent.ts runs Generate with a declared tool on the local
    simulator and hands the call's token to tool_process.ts, a second Node
    process whose certificate grants no app: it reads identity and state,
    stages a state key and saves an artifact through ToolContextService,
    and is refused the agent's ContextService and an undeclared capability.
    The writes land with the function response, which revokes the token."""
    node, _ = ts_agent
    pair = ServiceProcesses(certs_dir, tmp_path, context={"require_client_cert": True}).start()
    env = {**_env(pair, certs_dir), "AGENTCTX_TOOL_CERT": str(certs_dir / "context-client.pem"),
           "AGENTCTX_TOOL_KEY": str(certs_dir / "context-client.key")}
    try:
        run = subprocess.run([node, str(HERE / "build" / "tool_agent.js")], env=env, capture_output=True, text=True,
                             timeout=120)
    finally:
        pair.stop()
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["call"] == {"name": "write_report", "id_matches": True}
    assert report["token"] == {"tool": "write_report", "capabilities": ["identity", "state_read", "state_write",
                                                                          "artifact_put"], "has_deadline": True}
    tool = report["tool"]
    assert tool["identity"]["tool"] == "write_report" and tool["identity"]["session"].startswith("apps/polyglot-tools/")
    assert (tool["city"], tool["staged_state"]) == ("Oslo", "Oslo")
    assert tool["saved"] == {"artifact": "report.md", "version": 0, "size_bytes": len("# Weather in Oslo\nsunny, 21 C")}
    assert tool["refused"] == {"agent_call": "PermissionDenied", "undeclared": {
        "code": "PermissionDenied", "reason": "TOOL_CAPABILITY_MISSING",
        "metadata": {"capability": "artifact_delete", "tool": "write_report"}}}
    assert report["before"] == {"artifacts": [], "state_has_report": False}
    assert report["after"] == {"artifacts": ["report.md"], "report": "# Weather in Oslo\nsunny, 21 C",
                               "state_report_city": "Oslo"}
    assert report["answer_tokens"] == 0
    assert report["revoked"] == "PermissionDenied TOOL_TOKEN_REVOKED"
    assert "tt1." not in run.stdout + run.stderr, "no token (tt1.<claims>.<mac>) in either process's output"
