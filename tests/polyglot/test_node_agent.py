"""The polyglot client: a Node.js agent (@grpc/grpc-js and
@grpc/proto-loader from the npm registry, stubs loaded from protos/ at run
time) runs a five-turn, tool-using conversation against both services as
real processes, over TLS with a client certificate."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from tests.e2e.processes import ServiceProcesses

HERE = pathlib.Path(__file__).parent


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required for the polyglot client test (Node.js 18 or later)")
    return path


@pytest.fixture(scope="module")
def node_agent() -> list[str]:
    """``node agent.js``, its packages installed from the lock file."""
    node = _tool("node")
    if not (HERE / "node_modules" / "@grpc" / "grpc-js").is_dir():
        subprocess.run([_tool("npm"), "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=600)
    return [node, str(HERE / "agent.js")]


def test_node_agent_runs_a_tool_using_conversation(node_agent, certs_dir, tmp_path) -> None:
    pair = ServiceProcesses(certs_dir, tmp_path, cache={"local_min_cache_tokens": 64, "min_prefix_tokens": 64}).start()
    try:
        env = {
            **os.environ,
            "AGENTCTX_TARGET": f"127.0.0.1:{pair.context_port}",
            "AGENTCTX_CA": str(certs_dir / "ca.pem"),
            "AGENTCTX_CERT": str(certs_dir / "agent-client.pem"),
            "AGENTCTX_KEY": str(certs_dir / "agent-client.key"),
        }
        run = subprocess.run(node_agent, env=env, capture_output=True, text=True, timeout=120)
    finally:
        pair.stop()
    lines = run.stdout.strip().splitlines() or run.stderr.strip().splitlines()
    assert run.returncode == 0, run.stderr
    report = json.loads(lines[-1])
    assert report["ok"] is True
    turns = report["turns"]
    assert len(turns) == 5
    assert report["tool_calls"] >= 1 and any(t["tool_call"] for t in turns)
    assert [t["sequence"] for t in turns] == sorted(t["sequence"] for t in turns)
    assert all(t["prompt_tokens"] > 0 for t in turns)
    assert "CACHE_STATE_CREATED" in {t["cache_state"] for t in turns}, "the stable prefix was cached"
    assert report["events"] == 10, "five inputs and five replies, each stored once"
    assert report["built_contents"] == 11
