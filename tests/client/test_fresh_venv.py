"""agentctx-client on its own: a fresh venv with only that distribution
runs a short conversation against both services as real processes (TLS
with a client certificate), and cannot import the services' dependencies."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.client.venv import ROOT, client_python
from tests.e2e.processes import ServiceProcesses

SCRIPT = ROOT / "tests" / "client" / "conversation.py"


@pytest.fixture(scope="module")
def python():  # type: ignore[no-untyped-def]
    return client_python()


def test_the_venv_holds_only_the_client_and_its_dependencies(python) -> None:
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True, timeout=120)
    names = {p["name"].lower() for p in json.loads(listed.stdout)} - {"pip", "setuptools"}
    # typing_extensions comes with protobuf's and grpcio's own requirements.
    assert names <= {"agentctx-client", "grpcio", "protobuf", "googleapis-common-protos", "typing-extensions",
                     "typing_extensions"}
    assert "agentctx-client" in names


@pytest.mark.slow
def test_a_conversation_with_only_the_client_installed(python, certs_dir, tmp_path) -> None:
    pair = ServiceProcesses(certs_dir, tmp_path, cache={"local_min_cache_tokens": 64, "min_prefix_tokens": 64}).start()
    try:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AGENTCTX_TARGET": f"127.0.0.1:{pair.context_port}",
            "AGENTCTX_CA": str(certs_dir / "ca.pem"),
            "AGENTCTX_CERT": str(certs_dir / "agent-client.pem"),
            "AGENTCTX_KEY": str(certs_dir / "agent-client.key"),
        }
        # -I: neither the script's folder nor PYTHON* variables reach sys.path.
        run = subprocess.run([str(python), "-I", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
    finally:
        pair.stop()
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])

    assert report["importable"] == {"google.genai": False, "sqlalchemy": False, "pydantic": False,
                                    "agentctx_common": False, "context_service": False}
    assert report["packages_under"] == [str(python.parent.parent / "lib" / "python3.11" / "site-packages")]
    assert report["session_model"] == "local-sim-1" and report["session_state"] == {"trip": "Paris"}
    assert report["append"] == {"sequence": 1, "deduplicated_again": True}
    assert report["built"]["contents"] == 2 and report["built"]["last"] == "What should I pack?"
    assert report["built"]["events_seen"] == 1 and report["built"]["request_tokens"] > 0
    assert report["tool_call"] == {"name": "get_weather", "has_id": True}
    assert report["tool_answer"] == "local-sim used the result of get_weather"
    assert report["prompt_tokens"] > 0
    assert report["stream"] == {"chunks": report["stream"]["chunks"], "joined_is_reply": True, "partial": True,
                                "reply_id_kept": True}
    assert report["stream"]["chunks"] >= 1
    assert report["repeat"] == {"deduplicated": True, "same_reply": True}
    # 1 note + (input, reply) for the tool call, the tool result, the stream and the repeated turn;
    # the streamed chunks are not stored (the stored reply holds them).
    assert report["events"] == 9 and report["partial_events"] == 0
    assert report["sequences_in_order"] is True
    assert report["sessions"] is True
    assert report["errors"] == {
        "not_found": "SESSION_NOT_FOUND",
        "conflict": True,
        "invalid": ["INVALID_ARGUMENT", ["session_id"]],
        "budget": ["CURRENT_INPUT_EXCEEDS_BUDGET", "max_tokens"],
    }
    assert report["updated_state"] == {"trip": "Rome"} and report["deleted"] is True
