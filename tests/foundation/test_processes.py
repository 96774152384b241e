"""Both services as real processes: grpcurl lists and describes them through
reflection, health answers, a cache call without a client certificate fails,
and SIGTERM shuts them down gracefully."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config

GRPCURL = shutil.which("grpcurl") or str(pathlib.Path(sys.executable).parent / "grpcurl")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, certs_dir: pathlib.Path):
    tmp = tmp_path_factory.mktemp("pair")
    context_port, cache_port = free_port(), free_port()
    config = write_config(
        tmp / "agentctx.toml", certs_dir, context_port=context_port, cache_port=cache_port, data_dir=tmp / "data"
    )
    cache = spawn("cache", config, tmp / "cache.log")
    context = spawn("context", config, tmp / "context.log")
    try:
        wait_healthy(cache_port, certs_dir, "context-client", cache)
        wait_healthy(context_port, certs_dir, "agent-client", context)
        yield {"context": context_port, "cache": cache_port, "procs": (context, cache), "logs": tmp}
    finally:
        stop(context)
        stop(cache)


def test_grpcurl_lists_both_services(pair, certs_dir) -> None:
    context = subprocess.run(
        [GRPCURL, "-cacert", str(certs_dir / "ca.pem"), f"127.0.0.1:{pair['context']}", "list"],
        capture_output=True, text=True, timeout=30,
    )
    assert context.returncode == 0, context.stderr
    assert "agentctx.context.v1.ContextService" in context.stdout.split()
    assert "grpc.health.v1.Health" in context.stdout.split()
    cache = subprocess.run(
        [GRPCURL, "-cacert", str(certs_dir / "ca.pem"), "-cert", str(certs_dir / "context-client.pem"),
         "-key", str(certs_dir / "context-client.key"), f"127.0.0.1:{pair['cache']}", "list"],
        capture_output=True, text=True, timeout=30,
    )
    assert cache.returncode == 0, cache.stderr
    assert "agentctx.cache.v1.CacheService" in cache.stdout.split()


def test_grpcurl_describes_through_reflection(pair, certs_dir) -> None:
    result = subprocess.run(
        [GRPCURL, "-cacert", str(certs_dir / "ca.pem"), f"127.0.0.1:{pair['context']}",
         "describe", "agentctx.context.v1.ContextService"],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "rpc BuildContext" in result.stdout and "rpc AppendEvent" in result.stdout
    cache = subprocess.run(
        [GRPCURL, "-cacert", str(certs_dir / "ca.pem"), "-cert", str(certs_dir / "context-client.pem"),
         "-key", str(certs_dir / "context-client.key"), f"127.0.0.1:{pair['cache']}",
         "describe", "agentctx.cache.v1.AcquireLeaseRequest"],
        capture_output=True, text=True, timeout=30,
    )
    assert cache.returncode == 0, cache.stderr
    assert "CachePrefix prefix" in cache.stdout


def test_grpcurl_health_check(pair, certs_dir) -> None:
    for port, client in ((pair["context"], "agent-client"), (pair["cache"], "context-client")):
        result = subprocess.run(
            [GRPCURL, "-cacert", str(certs_dir / "ca.pem"), "-cert", str(certs_dir / f"{client}.pem"),
             "-key", str(certs_dir / f"{client}.key"), f"127.0.0.1:{port}", "grpc.health.v1.Health/Check"],
            capture_output=True, text=True, timeout=30,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"status": "SERVING"}


def test_cache_call_without_client_certificate_fails(pair, certs_dir) -> None:
    result = subprocess.run(
        [GRPCURL, "-connect-timeout", "3", "-cacert", str(certs_dir / "ca.pem"), "-d", '{"scope": {"app": "a"}}',
         f"127.0.0.1:{pair['cache']}", "agentctx.cache.v1.CacheService/GetScopeStatus"],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert "SERVING" not in result.stdout


def test_sigterm_shuts_down_gracefully(tmp_path, certs_dir) -> None:
    context_port, cache_port = free_port(), free_port()
    config = write_config(
        tmp_path / "agentctx.toml", certs_dir, context_port=context_port, cache_port=cache_port,
        data_dir=tmp_path / "data",
    )
    proc = spawn("cache", config, tmp_path / "cache.log")
    wait_healthy(cache_port, certs_dir, "context-client", proc)
    assert stop(proc) == 0
    messages = [json.loads(line)["msg"] for line in (tmp_path / "cache.log").read_text().splitlines()
                if line.startswith("{")]
    assert messages[-2:] == ["shutting down", "stopped"]


def test_readme_grpcurl_walkthrough_runs(pair, certs_dir, tmp_path) -> None:
    """The README's grpcurl examples, run as written against a live pair: every
    call succeeds except the one that shows a stale etag being ABORTED."""
    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    # The grpcurl walkthrough; "use a real model" ($M) needs a provider (test_readme_blocks runs it on fakes).
    script = "\n".join(b for b in blocks if ("$G" in b or "$C" in b) and "$M" not in b)
    script = (script.replace(".venv/bin/grpcurl", GRPCURL).replace(".agentctx/certs", str(certs_dir))
              .replace(".venv/bin/python", sys.executable)
              .replace(".agentctx/health.protoset", str(tmp_path / "health.protoset"))
              .replace("127.0.0.1:50051", f"127.0.0.1:{pair['context']}")
              .replace("127.0.0.1:50052", f"127.0.0.1:{pair['cache']}"))
    assert script.count("$G") >= 12, "the README lost its grpcurl walkthrough"
    (tmp_path / "walkthrough.sh").write_text(script)
    run = subprocess.run(["bash", str(tmp_path / "walkthrough.sh")], capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    assert output.count("ERROR:") == 1 and "ETAG_MISMATCH" in output, output
    assert '"secrets_pruned"' in output and "sk-123" not in output.split('"secrets_pruned"')[1]
    assert '"reply"' in output and "agentctx.cache.v1.CacheService" in output
    # The CompactSession example compacts the README's own session.
    assert '"compacted": true' in output, output
